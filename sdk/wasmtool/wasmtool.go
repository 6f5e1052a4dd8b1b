// Package wasmtool lets a Go program compiled to WASI preview1 (GOOS=wasip1
// GOARCH=wasm) serve agentkernel tool calls through the json ABI and the
// reactor ABI from the same main package:
//
//	func init() { wasmtool.Handle(handle) } // a reactor instance never runs main
//	func main() { wasmtool.Main() }         // the json ABI: one call on stdin
//
//	func handle(req wasmtool.Request) (wasmtool.Result, error) { ... }
//
// Built as a program (go build), the module is a WASI command for the json
// ABI: Main reads {"tool": ..., "args": {...}} from stdin and writes
// {"content": ..., "is_error": ...} to stdout. Built with
// -buildmode=c-shared, it is a reactor: the host runs _initialize (package
// initialisation, which registers the handler) ahead of time, then calls
// the agentkernel_alloc and agentkernel_call exports this package defines
// on wasip1. See wasm-tools/README.md for both ABIs.
//
// The handler is held in a package variable because a reactor has no other
// way to find it; a program has exactly one.
package wasmtool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"unicode/utf8"
)

// Request is one tool call.
type Request struct {
	// Tool is the name of the tool called; a module may serve several.
	Tool string `json:"tool"`
	// Args are the call's arguments, a JSON object the host has already
	// validated against the tool's schema.
	Args json.RawMessage `json:"args"`
}

// Result is what the model reads.
type Result struct {
	Content string `json:"content"`
	// IsError marks a result that reports a failure.
	IsError bool `json:"is_error,omitempty"`
}

// Handler serves one call. An error becomes a result with IsError set and
// the error's text as content.
type Handler func(req Request) (Result, error)

var handler Handler

// Handle registers the program's handler. Call it from an init function:
// reactor instances run package initialisation but never main.
func Handle(h Handler) { handler = h }

// Main serves the json ABI: it reads one request from stdin, writes the
// result to stdout and exits 0. It exits 1 if no handler is registered or
// stdout cannot be written.
func Main() {
	req, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdk: read request:", err)
		os.Exit(1)
	}
	if handler == nil {
		fmt.Fprintln(os.Stderr, "wasmtool: no handler: call wasmtool.Handle from an init function")
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(Serve(req)); err != nil {
		fmt.Fprintln(os.Stderr, "sdk: write result:", err)
		os.Exit(1)
	}
}

// Serve runs the registered handler on an encoded request and returns the
// encoded result. A request that does not decode, a missing handler, an
// error and a panic all become results with IsError set (a panic's stack
// goes to stderr).
func Serve(req []byte) []byte { return encodeResult(serve(req)) }

// encodeResult writes {"content": ..., "is_error": ...} without
// reflection: in a fresh instance encoding/json's first use is costly.
func encodeResult(r Result) []byte {
	b := make([]byte, 0, len(r.Content)+32)
	b = append(b, `{"content":`...)
	b = appendJSONString(b, r.Content)
	if r.IsError {
		b = append(b, `,"is_error":true`...)
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// decodeRequest reads {"tool": ..., "args": ...}. The host writes exactly
// that shape, which a fast path reads without reflection; anything else
// goes through encoding/json.
func decodeRequest(raw []byte) (Request, error) {
	const head, mid = `{"tool":"`, `","args":`
	s := raw
	if bytes.HasPrefix(s, []byte(head)) {
		s = s[len(head):]
		if i := bytes.IndexByte(s, '"'); i >= 0 && bytes.IndexByte(s[:i], '\\') < 0 && bytes.HasPrefix(s[i:], []byte(mid)) {
			tool := string(s[:i])
			args := bytes.TrimSpace(s[i+len(mid):])
			if len(args) > 1 && args[len(args)-1] == '}' && json.Valid(args[:len(args)-1]) {
				return Request{Tool: tool, Args: json.RawMessage(args[:len(args)-1])}, nil
			}
		}
	}
	var req Request
	err := json.Unmarshal(raw, &req)
	return req, err
}

func serve(raw []byte) (res Result) {
	if handler == nil {
		return Errorf("wasmtool: no handler: call wasmtool.Handle from an init function")
	}
	req, err := decodeRequest(raw)
	if err != nil {
		return Errorf("sdk: the request is not {\"tool\",\"args\"} JSON: %v", err)
	}
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "panic: %v\n%s", p, debug.Stack())
			res = Errorf("tool %s panicked: %v", req.Tool, p)
		}
	}()
	res, err = handler(req)
	if err != nil {
		return Result{Content: err.Error(), IsError: true}
	}
	return res
}

var warmers []func()

// Warm registers work that makes the first call faster, such as decoding
// an empty argument struct so encoding/json has built its caches. Reactor
// hosts run it right after initialising an instance, ahead of the call
// (agentkernel_warm); commands never run it. Call it from init.
func Warm(fn func()) { warmers = append(warmers, fn) }

// warm runs the sdk's own warm-up (the request and result codecs) and the
// registered warmers. Their panics are swallowed: warming is optional.
func warm() {
	defer func() { _ = recover() }()
	_, _ = decodeRequest([]byte(`{"tool":"","args":{}}`))
	_ = encodeResult(Result{Content: "é\n"})
	for _, fn := range warmers {
		fn()
	}
	// Grow the goroutine stack once now rather than by copying it, frame
	// by frame, during the call.
	growStack(64)
}

// growStack uses about n KiB of stack.
//
//go:noinline
func growStack(n int) byte {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return growStack(n-1) + buf[n%len(buf)]
}

// Text is a plain result.
func Text(s string) Result { return Result{Content: s} }

// Errorf is a result reporting a failure to the model.
func Errorf(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// JSON is a result whose content is v as compact JSON.
func JSON(v any) (Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Result{}, fmt.Errorf("encode result: %w", err)
	}
	return Result{Content: string(b)}, nil
}

// ErrUnknownTool is returned by handlers for a tool name they do not serve.
var ErrUnknownTool = errors.New("unknown tool")

// DecodeArgs decodes a call's arguments into v, refusing fields v does not
// have. Empty arguments decode as {}.
func DecodeArgs(args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}
