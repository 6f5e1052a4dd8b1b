package toolproto

import "strings"

// The tags of the Hermes format.
const (
	hermesOpen     = "<tool_call>"
	hermesClose    = "</tool_call>"
	hermesResponse = "<tool_response"
	hermesRespEnd  = "</tool_response>"
)

// hermes is the format of the Hermes and Qwen chat templates (and the
// models trained on them): calls in <tool_call> tags, results in
// <tool_response> tags.
type hermes struct{}

func (hermes) instructions(b *strings.Builder, tools []Tool) {
	b.WriteString("# Tools\n\nYou may call one or more tools to help with the user's request.\n\n")
	b.WriteString("The tools are listed within <tools></tools> tags, one JSON object each:\n<tools>\n")
	for _, t := range tools {
		b.WriteString(toolLine(t))
		b.WriteByte('\n')
	}
	b.WriteString("</tools>\n\n")
	b.WriteString("To call a tool, write a JSON object with its name and arguments within <tool_call></tool_call> tags:\n")
	b.WriteString("<tool_call>\n{\"name\": <tool-name>, \"arguments\": <args-json-object>}\n</tool_call>\n\n")
	b.WriteString("Rules:\n")
	b.WriteString("- Write any explanation first, then your calls (several, one <tool_call> block each, when they do not depend on each other), then stop.\n")
	b.WriteString("- The results come back in the next message, one <tool_response id=\"...\" name=\"...\"> block per call, in the order of your calls.\n")
	b.WriteString("- Never write a <tool_response> block yourself and never guess a result: wait for it.\n")
	b.WriteString("- When you need no tool, answer in plain text, without tags.")
}

func (hermes) writeCall(b *strings.Builder, c Call) {
	b.WriteString(hermesOpen)
	b.WriteString("\n{\"name\": ")
	b.WriteString(quote(c.Name))
	b.WriteString(", \"arguments\": ")
	b.WriteString(argsText(c.Arguments))
	b.WriteString("}\n")
	b.WriteString(hermesClose)
}

func (hermes) writeResult(b *strings.Builder, r Result) {
	b.WriteString(hermesResponse)
	b.WriteString(` id="`)
	b.WriteString(attr(r.ID))
	b.WriteString(`" name="`)
	b.WriteString(attr(r.Name))
	b.WriteByte('"')
	if r.IsError {
		b.WriteString(` error="true"`)
	}
	b.WriteString(">\n")
	// A result cannot end its own block early.
	b.WriteString(strings.ReplaceAll(r.Content, hermesRespEnd, `<\/tool_response>`))
	b.WriteByte('\n')
	b.WriteString(hermesRespEnd)
}

func (hermes) resultsPrefix() string { return hermesResponse }

func (hermes) callExample() string {
	return "<tool_call>\n{\"name\": \"<tool-name>\", \"arguments\": {<arguments>}}\n</tool_call>"
}

func (hermes) newScanner() scanner { return &hermesScanner{} }

// attr escapes an attribute value.
func attr(s string) string {
	if !strings.ContainsAny(s, `"<>&`) {
		return s
	}
	return strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;").Replace(s)
}

// hermesScanner is the Hermes state machine. Outside a call, a '<' starts
// a possible tag that is held until it becomes <tool_call> (a call opens),
// <tool_response followed by '>', '/' or a space (a result the model wrote
// itself), or something else (text). Inside a call, the body is kept up to
// MaxCallBytes and searched for </tool_call>, and for a <tool_call> that
// would nest. The tags contain a single '<' each, so a failed match can
// only restart at a '<', and every byte is looked at once.
type hermesScanner struct {
	inCall bool
	hold   []byte // outside: a possible tag, from its '<'
	body   []byte // inside: the call's text so far
	size   int    // bytes inside the call, body or not
	closeM int    // bytes of hermesClose matched at the end of the body
	openM  int    // bytes of hermesOpen matched at the end of the body
}

func (s *hermesScanner) write(d *Decoder, chunk string) {
	for i := 0; i < len(chunk) && !d.dead(); {
		if s.inCall {
			i = s.inside(d, chunk, i)
			continue
		}
		if len(s.hold) == 0 {
			j := strings.IndexByte(chunk[i:], '<')
			if j < 0 {
				d.text(chunk[i:])
				return
			}
			d.text(chunk[i : i+j])
			s.hold = append(s.hold, '<')
			i += j + 1
			continue
		}
		c := chunk[i]
		s.hold = append(s.hold, c)
		i++
		h := string(s.hold)
		switch {
		case h == hermesOpen:
			s.hold = s.hold[:0]
			s.inCall, s.body, s.size, s.closeM, s.openM = true, s.body[:0], 0, 0, 0
			d.attempted = true
		case len(h) == len(hermesResponse)+1 && strings.HasPrefix(h, hermesResponse) && strings.IndexByte("> \t\r\n/", c) >= 0:
			d.violate(FabricatedResult, 0, "", "the answer contains a <tool_response> block: results come from the tools, never from the model")
		case strings.HasPrefix(hermesOpen, h) || strings.HasPrefix(hermesResponse, h):
			// still a possible tag
		default:
			// Not a tag: the held bytes before c are text, and c is read
			// again (it may be a '<').
			d.text(h[:len(h)-1])
			s.hold = s.hold[:0]
			i--
		}
	}
}

// inside reads call text from chunk[i:] and returns where it stopped.
func (s *hermesScanner) inside(d *Decoder, chunk string, i int) int {
	for i < len(chunk) {
		if s.closeM == 0 && s.openM == 0 {
			// Nothing is being matched: skip to the next '<'.
			j := strings.IndexByte(chunk[i:], '<')
			if j < 0 {
				j = len(chunk) - i
			}
			if !s.keep(d, chunk[i:i+j]) {
				return len(chunk)
			}
			i += j
			if i >= len(chunk) {
				return i
			}
		}
		c := chunk[i]
		i++
		if !s.keep(d, chunk[i-1:i]) {
			return len(chunk)
		}
		s.closeM = advance(hermesClose, s.closeM, c)
		s.openM = advance(hermesOpen, s.openM, c)
		if s.openM == len(hermesOpen) {
			d.attempted = true
			d.violate(MalformedCall, 0, "", "a <tool_call> tag inside another <tool_call>")
			return len(chunk)
		}
		if s.closeM == len(hermesClose) {
			body := s.body[:len(s.body)-len(hermesClose)]
			s.inCall = false
			d.call(body)
			return i
		}
	}
	return i
}

// keep adds call text to the body; false when the call is too large.
func (s *hermesScanner) keep(d *Decoder, t string) bool {
	s.size += len(t)
	if d.tooLarge(s.size - len(hermesClose)) {
		return false
	}
	s.body = append(s.body, t...)
	return true
}

// advance is the next match length of tag after byte c, for a tag with a
// single '<' at its start.
func advance(tag string, m int, c byte) int {
	switch {
	case c == tag[m]:
		return m + 1
	case c == '<':
		return 1
	}
	return 0
}

func (s *hermesScanner) close(d *Decoder) {
	if s.inCall {
		d.violate(MalformedCall, 0, "", "the <tool_call> tag was never closed with </tool_call>")
		return
	}
	// A tag cut short at the end of the answer was text after all.
	d.text(string(s.hold))
	s.hold = s.hold[:0]
}
