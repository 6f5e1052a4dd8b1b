package wasmtool

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func withHandler(t *testing.T, h Handler) {
	t.Helper()
	old := handler
	handler = h
	t.Cleanup(func() { handler = old })
}

func TestServe(t *testing.T) {
	// A panic's stack goes to stderr: catch it.
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = stderr
	defer func() { os.Stderr = old }()

	withHandler(t, func(req Request) (Result, error) {
		var a struct {
			N int `json:"n"`
		}
		switch req.Tool {
		case "double":
			if err := DecodeArgs(req.Args, &a); err != nil {
				return Result{}, err
			}
			return JSON(map[string]int{"n": 2 * a.N})
		case "fail":
			return Errorf("no %s", "way"), nil
		case "error":
			return Result{}, errors.New("broken")
		case "panic":
			panic("kaboom")
		}
		return Result{}, ErrUnknownTool
	})
	for _, tc := range []struct{ req, want string }{
		{`{"tool":"double","args":{"n":21}}`, `{"content":"{\"n\":42}"}`},
		{`{"args": {"n": 1}, "tool": "double"}`, `{"content":"{\"n\":2}"}`}, // not the host's shape: the slow path
		{`{"tool":"double","args":{"n":1,"m":2}}`, `{"content":"invalid arguments: json: unknown field \"m\"","is_error":true}`},
		{`{"tool":"fail","args":{}}`, `{"content":"no way","is_error":true}`},
		{`{"tool":"error","args":{}}`, `{"content":"broken","is_error":true}`},
		{`{"tool":"panic","args":{}}`, `{"content":"tool panic panicked: kaboom","is_error":true}`},
		{`{"tool":"x","args":{}}`, `{"content":"unknown tool","is_error":true}`},
		{`not json`, `{"content":"sdk: the request is not {\"tool\",\"args\"} JSON: invalid character 'o' in literal null (expecting 'u')","is_error":true}`},
	} {
		if got := string(Serve([]byte(tc.req))); got != tc.want {
			t.Errorf("Serve(%s) = %s, want %s", tc.req, got, tc.want)
		}
	}
	if b, _ := os.ReadFile(stderr.Name()); !strings.Contains(string(b), "panic: kaboom") || !strings.Contains(string(b), "wasmtool.TestServe") {
		t.Errorf("stderr %q lacks the panic and its stack", b)
	}
}

func TestDecodeRequestFastPath(t *testing.T) {
	for _, raw := range []string{
		`{"tool":"a.b","args":{"x":[1,2,{"y":"}"}]}}`,
		`{"tool":"t","args":{}}`,
		`{"tool":"t\"q","args":{}}`,    // escaped name: slow path
		`{"tool":"t","args":{},"x":1}`, // extra field: slow path
	} {
		got, err := decodeRequest([]byte(raw))
		var want Request
		werr := json.Unmarshal([]byte(raw), &want)
		if (err != nil) != (werr != nil) || got.Tool != want.Tool || string(got.Args) != string(want.Args) {
			t.Errorf("%s: got %+v, %v; encoding/json %+v, %v", raw, got, err, want, werr)
		}
	}
}

func FuzzEncodeResult(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" backslash \\ newline \n tab \t", "\x00\x1f\x7f", "é ✓ \u2028\u2029", "\xff\xfe bad utf8"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, content string, isError bool) {
		b := encodeResult(Result{Content: content, IsError: isError})
		var back Result
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", content, b, err)
		}
		// Invalid UTF-8 becomes U+FFFD per byte, as with encoding/json.
		jb, _ := json.Marshal(content)
		var want string
		_ = json.Unmarshal(jb, &want)
		if back.Content != want || back.IsError != isError {
			t.Fatalf("round trip of %q gave %+v", content, back)
		}
	})
}

func Example() {
	// A tool's main package registers its handler in init and calls Main:
	//
	//	func init() { wasmtool.Handle(handle) }
	//	func main() { wasmtool.Main() }
	Handle(func(req Request) (Result, error) {
		var a struct {
			Name string `json:"name"`
		}
		if err := DecodeArgs(req.Args, &a); err != nil {
			return Result{}, err
		}
		return Text("hello, " + a.Name), nil
	})
	defer Handle(nil)

	// What the host sends and gets back: over stdin and stdout for the json
	// ABI, through guest memory for the reactor ABI.
	fmt.Println(string(Serve([]byte(`{"tool":"greet","args":{"name":"wasm"}}`))))
	// Output: {"content":"hello, wasm"}
}
