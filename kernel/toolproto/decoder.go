package toolproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The defaults of DecoderConfig.
const (
	DefaultMaxCalls     = 64
	DefaultMaxCallBytes = 1 << 20
)

// DecoderConfig bounds a Decoder. The zero value means the defaults and
// every tool offered.
type DecoderConfig struct {
	// Offered reports whether a tool may be called this turn; nil offers
	// every name.
	Offered func(name string) bool
	// MaxCalls bounds the calls of one answer (default DefaultMaxCalls).
	MaxCalls int
	// MaxCallBytes bounds the text of one call (default
	// DefaultMaxCallBytes).
	MaxCallBytes int
}

// Decoder parses one streamed answer. Write it the text fragments in
// order, then Close it. A Decoder is used by one goroutine.
type Decoder struct {
	cfg     DecoderConfig
	sc      scanner
	emit    func(string)
	visible strings.Builder
	calls   []Call
	v       *Violation
	// afterCall: a call was seen; only whitespace and calls may follow.
	afterCall bool
	attempted bool
	closed    bool
}

// NewDecoder returns a Decoder for one answer.
func (c *Codec) NewDecoder(cfg DecoderConfig) *Decoder {
	if cfg.MaxCalls <= 0 {
		cfg.MaxCalls = DefaultMaxCalls
	}
	if cfg.MaxCallBytes <= 0 {
		cfg.MaxCallBytes = DefaultMaxCallBytes
	}
	return &Decoder{cfg: cfg, sc: c.f.newScanner()}
}

// Write parses the next fragment. emit (nil for none) receives the text
// that is certain to be text outside a call, as soon as it is; a
// fragment that may start a tag is held back until the next fragments
// decide. After a violation Write only counts.
func (d *Decoder) Write(chunk string, emit func(string)) {
	if d.closed || d.v != nil || chunk == "" {
		return
	}
	d.emit = emit
	d.sc.write(d, chunk)
	d.emit = nil
}

// Close ends the answer: held text that never became a tag is passed on,
// a call still open is a violation. It returns the Answer; calling it
// again returns the same Answer.
func (d *Decoder) Close(emit func(string)) Answer {
	if !d.closed {
		d.closed = true
		if d.v == nil {
			d.emit = emit
			d.sc.close(d)
			d.emit = nil
		}
	}
	a := Answer{Text: d.visible.String(), Violation: d.v, Attempted: d.attempted}
	if d.v == nil {
		a.Calls = d.calls
	}
	return a
}

// dead reports whether the answer is already broken: nothing more is read.
func (d *Decoder) dead() bool { return d.v != nil }

// text takes text that is certainly outside any call.
func (d *Decoder) text(s string) {
	if s == "" || d.v != nil {
		return
	}
	if d.afterCall {
		if strings.TrimSpace(s) != "" {
			d.violate(ProseAfterCall, len(d.calls), "", "text after the last call, written before its result came back")
		}
		return
	}
	d.visible.WriteString(s)
	if d.emit != nil {
		d.emit(s)
	}
}

// call takes a complete call body (the JSON object) and checks it.
func (d *Decoder) call(body []byte) {
	n := len(d.calls) + 1
	d.attempted = true
	name, args, err := parseCall(body)
	if err != nil {
		d.violate(MalformedCall, n, "", err.Error())
		return
	}
	d.found(name, args)
}

// found takes a parsed call.
func (d *Decoder) found(name, args string) {
	n := len(d.calls) + 1
	d.attempted = true
	if n > d.cfg.MaxCalls {
		d.violate(TooManyCalls, n, "", fmt.Sprintf("more than %d calls in one answer", d.cfg.MaxCalls))
		return
	}
	if d.cfg.Offered != nil && !d.cfg.Offered(name) {
		d.violate(UnknownTool, n, name, fmt.Sprintf("no tool named %q is offered", name))
		return
	}
	d.calls = append(d.calls, Call{Name: name, Arguments: args})
	d.afterCall = true
}

// violate records the first violation; the rest of the answer is ignored.
func (d *Decoder) violate(k Kind, call int, name, detail string) {
	if d.v != nil {
		return
	}
	switch k {
	case MalformedCall, UnknownTool, TooManyCalls, CallTooLarge, ProseAfterCall:
		d.attempted = true
	}
	if call == 0 && (k == MalformedCall || k == CallTooLarge) {
		call = len(d.calls) + 1
	}
	d.v = &Violation{Kind: k, Call: call, Name: name, Detail: detail}
	d.calls = nil
}

// tooLarge reports a call body over MaxCallBytes.
func (d *Decoder) tooLarge(size int) bool {
	if size <= d.cfg.MaxCallBytes {
		return false
	}
	d.violate(CallTooLarge, 0, "", fmt.Sprintf("a call longer than %d bytes", d.cfg.MaxCallBytes))
	return true
}

// parseCall reads a call object: {"name": "...", "arguments": {...}} (or
// "parameters"); arguments written as a JSON string holding an object are
// accepted, missing or null arguments are {}.
func parseCall(body []byte) (name, args string, err error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return "", "", fmt.Errorf("the call is empty")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return "", "", fmt.Errorf("the call is not a valid JSON object (%v): %s", jsonError(err), excerpt(string(body)))
	}
	rawName, ok := obj["name"]
	if !ok {
		return "", "", fmt.Errorf("the call has no \"name\": %s", excerpt(string(body)))
	}
	if err := json.Unmarshal(rawName, &name); err != nil || strings.TrimSpace(name) == "" {
		return "", "", fmt.Errorf("the call's \"name\" is not a tool name: %s", excerpt(string(rawName)))
	}
	name = strings.TrimSpace(name)
	raw, ok := obj["arguments"]
	key := "arguments"
	if !ok {
		raw, ok = obj["parameters"]
		key = "parameters"
	}
	raw = bytes.TrimSpace(raw)
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return name, "{}", nil
	}
	if raw[0] == '"' { // OpenAI style: the object as a string
		var s string
		if json.Unmarshal(raw, &s) == nil {
			raw = bytes.TrimSpace([]byte(s))
		}
	}
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return "", "", fmt.Errorf("the %q of %s are not a JSON object: %s", key, name, excerpt(string(raw)))
	}
	return name, string(raw), nil
}

// jsonError shortens a JSON decoding error.
func jsonError(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// excerpt quotes the start of s for a message.
func excerpt(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}
