package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/plugins/wasm"
	"github.com/agentkernel/agentkernel/plugins/wasm/wasmtest"
)

// module is the starlark.wasm the tests built (wasmtest.BuildTool).
var module string

func TestMain(m *testing.M) {
	var err error
	// Built into the tests' own directory: wasm-tools/starlark/starlark.wasm is
	// make's, precompiled for the kernel and the demo.
	module, err = wasmtest.BuildTool("../..", "wasm-tools/starlark", ".", "starlark.wasm", true)
	if err == nil {
		err = wasmtest.Precompile("../..", module)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasm-tools/starlark tests: setup:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func decode(t testing.TB, content string) outcome {
	t.Helper()
	var o outcome
	if err := json.Unmarshal([]byte(content), &o); err != nil {
		t.Fatalf("content %q is not an outcome: %v", content, err)
	}
	return o
}

// TestRun checks the interpreter natively (the same code the module runs).
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name, script, input string
		result, typ         string
		output, error       string
	}{
		{name: "expression", script: "1 + 2", result: "3", typ: "int"},
		{name: "last line", script: "xs = [i * i for i in range(4)]\nprint('n', len(xs))\nxs", result: "[0,1,4,9]", typ: "list", output: "n 4\n"},
		{name: "result variable wins", script: "result = {'a': 1}\n'ignored'", result: `{"a":1}`, typ: "dict"},
		{name: "input", script: "result = sorted([w.lower() for w in input['words']])", input: `{"words": ["b", "A"]}`, result: `["a","b"]`, typ: "list"},
		{name: "no input is None", script: "input == None", result: "true", typ: "bool"},
		{name: "statements only", script: "x = 1", result: "null", typ: "NoneType"},
		{name: "python dialect", script: "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nn = 0\nwhile n < 3:\n    n += 1\nresult = [fib(15), n, sorted(set([3, 1, 3]))]", result: "[610,3,[1,3]]", typ: "list"},
		{name: "modules", script: "[json.encode({'k': [1]}), math.floor(2.5), struct(a = 1).a, int(time.parse_duration('90s').seconds)]", result: `["{\"k\":[1]}",2,1,90]`, typ: "list"},
		{name: "not json", script: "lambda x: x", result: "null", typ: "function"},
		{name: "syntax error", script: "x = 1\ndef f(:\n", result: "null", typ: "NoneType", error: "syntax error: script.star:2:8: got ':'"},
		{name: "undefined name", script: "x = 1\nprint(x + nope)", result: "null", typ: "NoneType", error: "script.star:2:11: undefined: nope"},
		{name: "runtime error", script: "print('before')\nd = {}\nd['missing']", result: "null", typ: "NoneType", output: "before\n", error: "script.star:3:2: in <toplevel>\nError: key \"missing\" not in dict"},
		{name: "recursion folded", script: "def f(n):\n    return f(n + 1) if n < 10 else 1 // 0\nf(0)", result: "null", typ: "NoneType", error: "in f\n  [the line above repeated 9 more times]\n  script.star:2:38: in f\nError: floored division by zero"},
		{name: "no clock", script: "time.now()", result: "null", typ: "NoneType", error: "time.now is not available"},
		{name: "no load", script: "load('/etc/passwd', 'x')", result: "null", typ: "NoneType", error: "there are no modules to load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in json.RawMessage
			if tc.input != "" {
				in = json.RawMessage(tc.input)
			}
			res := run(tc.script, in)
			o := decode(t, res.Content)
			if string(o.Result) != tc.result || o.Type != tc.typ || o.Output != tc.output || !strings.Contains(o.Error, tc.error) || res.IsError != (tc.error != "") {
				t.Fatalf("got %+v (is_error %v)\nwant result %s type %s output %q error %q", o, res.IsError, tc.result, tc.typ, tc.output, tc.error)
			}
		})
	}
}

// TestBacktraceBounded: a deep mutual recursion cannot be folded line by
// line, so the traceback keeps its ends and says how much it left out.
// (The stack is made up: a real 100,000-frame recursion takes a minute
// under the race detector.)
func TestBacktraceBounded(t *testing.T) {
	name := filename
	var stack starlark.CallStack
	stack = append(stack, starlark.CallFrame{Name: "<toplevel>", Pos: syntax.MakePosition(&name, 5, 2)})
	for range 50_000 {
		stack = append(stack, starlark.CallFrame{Name: "a", Pos: syntax.MakePosition(&name, 2, 13)},
			starlark.CallFrame{Name: "b", Pos: syntax.MakePosition(&name, 4, 13)})
	}
	got := backtrace(&starlark.EvalError{Msg: "Starlark stack overflow", CallStack: stack})
	lines := strings.Split(got, "\n")
	if len(lines) != maxFrames+3 || lines[1] != "  script.star:5:2: in <toplevel>" || lines[maxFrames/2+1] != "  [99961 more lines]" ||
		lines[len(lines)-2] != "  script.star:4:13: in b" || lines[len(lines)-1] != "Error: Starlark stack overflow" {
		t.Fatalf("%d lines:\n%s", len(lines), got)
	}
}

// loadModule loads starlark.wasm as the kernel would, with the
// manifest's capabilities except its timeout: the copy in a temporary
// directory asks for timeout (a loaded test machine needs more than the
// shipped 5 s), and the grant allows it. The module is compiled (from the
// cache: the copy has the same hash) before loadModule returns.
func loadModule(t testing.TB, pool int, timeout time.Duration) kernel.Tool {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var manifest map[string]any
	b, err := os.ReadFile("tool.json")
	if err == nil {
		err = json.Unmarshal(b, &manifest)
	}
	if err != nil {
		t.Fatal(err)
	}
	delete(manifest, "$schema")
	manifest["capabilities"].(map[string]any)["timeout"] = timeout.String()
	b, _ = json.Marshal(manifest)
	mod, err := os.ReadFile(module)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "tool.json"), b, 0o600)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "starlark.wasm"), mod, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	h, err := wasm.NewHost(ctx, wasm.HostConfig{CacheDir: wasmtest.CacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	tools, _, err := h.Load(ctx, wasm.ModuleConfig{Path: filepath.Join(dir, "starlark.wasm"), Pool: pool, Grants: wasm.Grants{Timeout: wasm.Duration(timeout)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || tools[0].Spec().Name != "starlark" {
		t.Fatalf("tools %v", tools)
	}
	// Load is lazy; compile now so that the calls' deadlines measure calls.
	if err := wasm.Ready(ctx, tools[0]); err != nil {
		t.Fatal(err)
	}
	return tools[0]
}

func call(ctx context.Context, tool kernel.Tool, script string) (kernel.Result, error) {
	args, _ := json.Marshal(map[string]string{"script": script})
	return tool.Call(ctx, args)
}

// TestModule runs starlark.wasm in the sandbox: a script, a syntax error
// with its position, a runaway loop stopped by the step cap (with its
// printed output), the same loop stopped by the call's deadline, a memory
// hog stopped by memory_mb, and the tool still works.
func TestModule(t *testing.T) {
	ctx := context.Background()
	st := loadModule(t, 1, 2*time.Minute)

	res, err := call(ctx, st, "print('hi')\nlen([x * x for x in range(285)])")
	if err != nil || res.IsError {
		t.Fatalf("%+v, %v", res, err)
	}
	if o := decode(t, res.Content); string(o.Result) != "285" || o.Output != "hi\n" {
		t.Fatalf("outcome %+v", o)
	}

	res, err = call(ctx, st, "x = [1,\n  2,\n  3 4]")
	if err != nil || !res.IsError || !strings.Contains(decode(t, res.Content).Error, "script.star:3:6: got int literal") {
		t.Fatalf("syntax error: %+v, %v; want an error at script.star:3:6", res, err)
	}

	// The step cap ends an endless loop inside the guest: an error result
	// that keeps the output, well before the (long) timeout.
	res, err = call(ctx, st, "print('spinning')\nwhile True:\n    pass")
	if err != nil || !res.IsError {
		t.Fatalf("endless loop under the step cap: %+v, %v", res, err)
	}
	if o := decode(t, res.Content); !strings.Contains(o.Error, "execution step limit exceeded") || o.Output != "spinning\n" {
		t.Fatalf("endless loop under the step cap: %+v", o)
	}

	// A deadline shorter than the step cap: the host stops the instance
	// with the timeout code, and the output printed so far is in the error.
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err = call(tctx, st, "print('spinning')\nwhile True:\n    pass")
	var te *kernel.ToolError
	if !errors.As(err, &te) || te.Code != "timeout" || !strings.Contains(res.Content, "spinning") {
		t.Fatalf("runaway loop past its deadline: %+v, %v; want a timeout showing the output", res, err)
	}

	res, err = call(ctx, st, "xs = []\nwhile True:\n    xs.append('x' * 1000000)")
	if !errors.As(err, &te) || te.Code != "memory_limit" || !res.IsError {
		t.Fatalf("memory hog: %+v, %v; want memory_limit", res, err)
	}

	if res, err := call(ctx, st, "'still here'"); err != nil || string(decode(t, res.Content).Result) != `"still here"` {
		t.Fatalf("after the attacks: %+v, %v", res, err)
	}
}

// TestNoHostAccess: a script has no way to the host's files or
// environment. The marker file and variable exist on the host; every way
// a Starlark script could name them fails, and the marker never reaches
// the result. It would fail if the interpreter got a built-in that reads
// files or the environment (open, getenv, an os module) or a load() that
// reads files. That the module itself sees no host files and no host
// environment, whatever code it runs, is the sandbox's attack tests
// (plugins/wasm/attack_test.go).
func TestNoHostAccess(t *testing.T) {
	const marker = "starlark-host-secret-5c1d"
	t.Setenv("STARLARK_TEST_SECRET", marker)
	file := filepath.Join(t.TempDir(), "secret.star")
	if err := os.WriteFile(file, []byte("secret = '"+marker+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(file)
	st := loadModule(t, 0, time.Minute)
	for _, script := range []string{
		fmt.Sprintf("load(%q, 'secret')\nsecret", abs),
		fmt.Sprintf("open(%q).read()", abs),
		"getenv('STARLARK_TEST_SECRET')",
		"os.environ['STARLARK_TEST_SECRET']",
		"__import__('os')",
		"[k for k in dir(json) + dir(math) + dir(time) if k in ('open', 'read', 'getenv', 'env', 'system', 'exec')]",
	} {
		res, err := call(context.Background(), st, script)
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		if strings.Contains(res.Content, marker) {
			t.Fatalf("%s: the host's secret reached the script: %s", script, res.Content)
		}
		o := decode(t, res.Content)
		if !res.IsError && string(o.Result) != "[]" {
			t.Errorf("%s: not refused: %+v", script, o)
		}
	}
}

// TestParallel: many calls at once through a small pool all succeed, each
// with its own answer (instances share nothing).
func TestParallel(t *testing.T) {
	st := loadModule(t, 2, 2*time.Minute)
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := call(context.Background(), st, fmt.Sprintf("seen = %d\nresult = len([x for x in range(seen) for y in range(x + 1)]) + seen", i))
			if err != nil || res.IsError {
				errs <- fmt.Errorf("call %d: %+v, %v", i, res, err)
				return
			}
			var o outcome // not decode: t.Fatal must not be called off the test's goroutine
			if err := json.Unmarshal([]byte(res.Content), &o); err != nil {
				errs <- fmt.Errorf("call %d: %q: %v", i, res.Content, err)
			} else if got, want := string(o.Result), fmt.Sprint(i*(i+1)/2+i); got != want {
				errs <- fmt.Errorf("call %d: result %s, want %s", i, got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkSmallScript is one tool call of a small script through a
// pre-warmed pool of two instances, one caller at a time: what a model's
// starlark call costs. Reports p50 and p99.
func BenchmarkSmallScript(b *testing.B) {
	st := loadModule(b, 2, time.Minute)
	script := "words = ['b', 'a', 'c', 'a']\ncounts = {}\nfor w in words:\n    counts[w] = counts.get(w, 0) + 1\nresult = sorted(counts.items())"
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		res, err := call(context.Background(), st, script)
		lat = append(lat, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("%+v, %v", res, err)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
}

// BenchmarkStepCap is how long the step cap (maxSteps) takes to stop an
// endless loop inside the module: it must stay well inside the manifest's
// timeout for the step cap, not the host, to end such scripts.
func BenchmarkStepCap(b *testing.B) {
	st := loadModule(b, 1, 10*time.Minute)
	for b.Loop() {
		res, err := call(context.Background(), st, "while True:\n    pass")
		if err != nil || !strings.Contains(res.Content, "execution step limit exceeded") {
			b.Fatalf("%+v, %v", res, err)
		}
	}
}
