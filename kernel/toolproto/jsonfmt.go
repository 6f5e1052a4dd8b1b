package toolproto

import (
	"bytes"
	"encoding/json"
	"strings"
)

// pythonTag is the marker Llama 3.x may put before a call; a server that
// renders special tokens passes it on.
const pythonTag = "<|python_tag|>"

// maxFence bounds a Markdown fence line (``` and a language name).
const maxFence = 24

// jsonFormat is Llama 3.x's JSON tool calling: a call is a JSON object
// {"name": ..., "parameters": {...}} that starts a line; results come back
// as {"tool_result": {...}} lines.
type jsonFormat struct{}

func (jsonFormat) instructions(b *strings.Builder, tools []Tool) {
	b.WriteString("# Tools\n\nYou can call the functions below to help with the user's request.\n\n")
	b.WriteString("To call a function, respond with a JSON object on a line of its own, in the format ")
	b.WriteString("{\"name\": function name, \"parameters\": dictionary of argument name and its value}. Do not use variables.\n\n")
	b.WriteString("Functions:\n")
	for _, t := range tools {
		b.WriteString(toolLine(t))
		b.WriteByte('\n')
	}
	b.WriteString("\nRules:\n")
	b.WriteString("- Write any explanation first, then one JSON object per call, each on its own line (several when they do not depend on each other), then stop.\n")
	b.WriteString("- The results come back in the next message, one {\"tool_result\": {\"id\": ..., \"name\": ..., \"content\": ...}} line per call (\"error\" instead of \"content\" when the call failed), in the order of your calls.\n")
	b.WriteString("- Never write a tool_result yourself and never guess a result: wait for it.\n")
	b.WriteString("- When you need no function, answer in plain text, and never start a line with a JSON object that has \"name\" and \"parameters\".")
}

func (jsonFormat) writeCall(b *strings.Builder, c Call) {
	b.WriteString(`{"name": `)
	b.WriteString(quote(c.Name))
	b.WriteString(`, "parameters": `)
	b.WriteString(argsText(c.Arguments))
	b.WriteByte('}')
}

func (jsonFormat) writeResult(b *strings.Builder, r Result) {
	type content struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Content string `json:"content"`
	}
	type failure struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Error string `json:"error"`
	}
	var v any = content{r.ID, r.Name, r.Content}
	if r.IsError {
		v = failure{r.ID, r.Name, r.Content}
	}
	b.WriteString(marshal(struct {
		ToolResult any `json:"tool_result"`
	}{v}))
}

func (jsonFormat) resultsPrefix() string { return `{"tool_result"` }

func (jsonFormat) callExample() string {
	return `{"name": "<function-name>", "parameters": {<arguments>}}` + " (one per line)"
}

func (jsonFormat) newScanner() scanner { return &jsonScanner{} }

// The states of jsonScanner.
const (
	jsLineStart = iota // at the start of a line (leading blanks held)
	jsMid              // inside a line of text
	jsObject           // inside a JSON object that started a line
	jsTag              // reading what may be <|python_tag|>
	jsFence            // reading what may be a ``` fence line
	jsAfter            // after a call, on the same line
)

// jsonScanner is the JSON state machine. A '{' at the start of a line
// (after blanks, a <|python_tag|>, or a ``` fence line) starts an object,
// read with its strings and nesting to its closing brace; then it is a
// call ("name" and "parameters" or "arguments"), a result the model wrote
// itself ("tool_result"), or text. Everything else is text. Several
// calls may share a line when ';' or ',' separates them.
type jsonScanner struct {
	st    int
	ws    []byte // blanks at the start of the line, held
	hold  []byte // a possible <|python_tag|> or fence line
	fence []byte // a complete fence line (and blank lines after it), held
	body  []byte // the object so far
	depth int
	inStr bool
	esc   bool
}

// flush passes the held text on as text.
func (s *jsonScanner) flush(d *Decoder, extra []byte) {
	d.text(string(s.fence))
	d.text(string(s.ws))
	d.text(string(extra))
	s.fence, s.ws = s.fence[:0], s.ws[:0]
}

func (s *jsonScanner) write(d *Decoder, chunk string) {
	for i := 0; i < len(chunk) && !d.dead(); {
		c := chunk[i]
		switch s.st {
		case jsMid:
			j := strings.IndexByte(chunk[i:], '\n')
			if j < 0 {
				d.text(chunk[i:])
				return
			}
			d.text(chunk[i : i+j+1])
			i += j + 1
			s.st = jsLineStart
			continue
		case jsLineStart:
			switch c {
			case ' ', '\t', '\r':
				s.ws = append(s.ws, c)
			case '\n':
				if len(s.fence) > 0 && len(s.fence) < maxFence*4 {
					s.fence = append(s.fence, s.ws...)
					s.fence = append(s.fence, '\n')
					s.ws = s.ws[:0]
				} else {
					s.flush(d, []byte{'\n'})
				}
			case '{':
				s.st, s.body, s.depth, s.inStr, s.esc = jsObject, append(s.body[:0], '{'), 1, false, false
			case '<':
				s.st, s.hold = jsTag, append(s.hold[:0], '<')
			case '`':
				s.st, s.hold = jsFence, append(s.hold[:0], '`')
			default:
				s.flush(d, nil)
				s.st = jsMid
				continue // read c again as text
			}
			i++
		case jsTag:
			s.hold = append(s.hold, c)
			i++
			switch h := string(s.hold); {
			case h == pythonTag:
				s.hold, s.st = s.hold[:0], jsLineStart
			case strings.HasPrefix(pythonTag, h):
			default:
				s.flush(d, s.hold[:len(s.hold)-1])
				s.hold, s.st = s.hold[:0], jsMid
				i--
			}
		case jsFence:
			s.hold = append(s.hold, c)
			i++
			n := len(s.hold)
			switch {
			case n <= 3 && c == '`':
			case n > 3 && c == '\n' && fenceLine(s.hold):
				if d.afterCall {
					s.hold = s.hold[:0] // a fence closing the calls
				} else {
					if len(s.fence) > 0 { // the one before opened a text block
						d.text(string(s.fence))
						s.fence = s.fence[:0]
					}
					s.fence = append(append(s.fence, s.ws...), s.hold...)
					s.ws, s.hold = s.ws[:0], s.hold[:0]
				}
				s.st = jsLineStart
			case n > 3 && n <= maxFence && c != '\n' && c != '`':
			default:
				s.flush(d, s.hold[:n-1])
				s.hold, s.st = s.hold[:0], jsMid
				i--
			}
		case jsObject:
			i = s.object(d, chunk, i)
		case jsAfter:
			switch c {
			case ' ', '\t', '\r', ';', ',':
			case '\n':
				s.st = jsLineStart
			case '{':
				s.st, s.body, s.depth, s.inStr, s.esc = jsObject, append(s.body[:0], '{'), 1, false, false
			default:
				s.st = jsMid
				continue // text after a call: a violation, reported by d.text
			}
			i++
		}
	}
}

// fenceLine reports whether line (ending in '\n') is ``` and an optional
// language name.
func fenceLine(line []byte) bool {
	lang := bytes.TrimRight(line[3:], " \t\r\n")
	for _, c := range lang {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// object reads object text from chunk[i:] and returns where it stopped.
func (s *jsonScanner) object(d *Decoder, chunk string, i int) int {
	start := i
	for ; i < len(chunk); i++ {
		c := chunk[i]
		switch {
		case s.esc:
			s.esc = false
		case s.inStr:
			switch c {
			case '\\':
				s.esc = true
			case '"':
				s.inStr = false
			}
		case c == '"':
			s.inStr = true
		case c == '{':
			s.depth++
		case c == '}':
			s.depth--
			if s.depth == 0 {
				if d.tooLarge(len(s.body) + i + 1 - start) {
					return len(chunk)
				}
				s.body = append(s.body, chunk[start:i+1]...)
				s.done(d)
				return i + 1
			}
		}
	}
	if d.tooLarge(len(s.body) + i - start) {
		return len(chunk)
	}
	s.body = append(s.body, chunk[start:]...)
	return i
}

// done classifies a complete object.
func (s *jsonScanner) done(d *Decoder) {
	var obj map[string]json.RawMessage
	err := json.Unmarshal(s.body, &obj)
	switch {
	case err == nil && obj["tool_result"] != nil:
		d.violate(FabricatedResult, 0, "", "the answer contains a tool_result object: results come from the tools, never from the model")
	case err == nil && callShape(obj):
		s.fence, s.ws = s.fence[:0], s.ws[:0] // the call's framing
		d.call(s.body)
		s.st = jsAfter
	case err != nil && looksLikeCall(s.body):
		d.call(s.body) // reports why it is malformed
	default:
		s.flush(d, s.body)
		s.st = jsMid
	}
}

// callShape reports whether an object is a call: "name", and
// "parameters" or "arguments", and nothing else but "type".
func callShape(obj map[string]json.RawMessage) bool {
	_, p := obj["parameters"]
	_, a := obj["arguments"]
	if _, ok := obj["name"]; !ok || !p && !a {
		return false
	}
	for k := range obj {
		switch k {
		case "name", "parameters", "arguments", "type":
		default:
			return false
		}
	}
	return true
}

// looksLikeCall reports whether broken object text was meant as a call.
func looksLikeCall(body []byte) bool {
	return bytes.Contains(body, []byte(`"name"`)) &&
		(bytes.Contains(body, []byte(`"parameters"`)) || bytes.Contains(body, []byte(`"arguments"`)))
}

func (s *jsonScanner) close(d *Decoder) {
	switch s.st {
	case jsObject:
		if looksLikeCall(s.body) {
			d.attempted = true
			d.violate(MalformedCall, 0, "", "the call's JSON object was never closed")
			return
		}
		s.flush(d, s.body)
	case jsTag, jsFence:
		s.flush(d, s.hold)
	default:
		s.flush(d, nil)
	}
}
