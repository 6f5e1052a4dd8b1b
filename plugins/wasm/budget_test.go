package wasm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// stackOverflowModule recurses without end: every call adds a frame to
// wazero's native stack, which lives outside linear memory, until wazero
// traps with a stack overflow (168 MB of stacks in all).
//
//	(module
//	  (memory (export "memory") 1)
//	  (func $r (call $r))
//	  (func (export "_start") (call $r)))
func stackOverflowModule() []byte {
	m := asmModule{
		types: []funcType{{}},
		funcs: []asmFunc{
			{typ: 0, body: []byte{0x10, 0x00}}, // call 0
			{typ: 0, body: []byte{0x10, 0x00}}, // call 0
		},
		memory:  []byte{0x00, 0x01},
		exports: []asmExport{{"memory", externMemory, 0}, {"_start", externFunc, 1}},
	}
	return m.bytes()
}

// budgetChildEnv makes the test binary run the stack overflow scenario
// for TestStackOverflowsStayInBudget and print what it measured.
const budgetChildEnv = "AGENTKERNEL_WASM_BUDGET_CHILD"

const (
	overflowCalls   = 25
	overflowBudget  = 512 // MiB: 2 calls at a time (64 + 160 MiB each)
	overflowMemMB   = 64
	overflowRSSSlop = 256 // MiB above the budget the process may grow
)

// TestStackOverflowsStayInBudget: 25 parallel stack overflows at
// memory_mb 64 (each can take 168 MB of wazero stacks outside memory_mb;
// together about 3.2 GB) keep the process's resident memory under the
// host's memory budget, because calls wait for their share of it. It
// runs in a child process so that the peak RSS it reads is the
// scenario's alone.
func TestStackOverflowsStayInBudget(t *testing.T) {
	if os.Getenv(budgetChildEnv) == "1" {
		t.Skip("the child runs TestStackOverflowBudgetChild only")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/status")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if raceEnabled {
		// The race detector shadows every byte wazero copies between
		// stacks, several times over: measure a build without it.
		exe = filepath.Join(t.TempDir(), "wasm.test")
		// -trimpath, as bin/kernel is built:
		// wazero and the module's packages come from go build's cache.
		build := exec.Command("go", "test", "-c", "-trimpath", "-o", exe, ".")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the test binary without -race: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(exe, "-test.run=^TestStackOverflowBudgetChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), budgetChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var r budgetReport
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "BUDGET-REPORT "); ok {
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r.Calls != overflowCalls {
		t.Fatalf("the child reported no scenario:\n%s", out)
	}
	t.Logf("%+v", r)
	// The cause: the budget held calls back, and never more than it at once.
	if r.Overflows != overflowCalls {
		t.Errorf("%d of %d calls ended in a stack overflow trap; codes %v", r.Overflows, overflowCalls, r.Codes)
	}
	if r.Waited == 0 {
		t.Error("no call waited for the memory budget")
	}
	if r.PeakMB > overflowBudget {
		t.Errorf("the budget handed out %d MiB at once, over its %d", r.PeakMB, overflowBudget)
	}
	// The effect: resident memory grew by at most the budget (and slop
	// for the Go heap's own pacing), not 25 × 168 MB.
	if grow := r.HWMMB - r.BaseMB; grow > overflowBudget+overflowRSSSlop {
		t.Errorf("peak RSS grew by %d MiB (from %d to %d), more than the %d MiB budget + %d MiB", grow, r.BaseMB, r.HWMMB, overflowBudget, overflowRSSSlop)
	}
}

type budgetReport struct {
	Calls, Overflows int
	Codes            []string
	Waited           int64
	PeakMB           int64
	BaseMB, HWMMB    int64
	ElapsedMS        int64
	FirstError       string
}

// TestStackOverflowBudgetChild is the child of TestStackOverflowsStayInBudget.
func TestStackOverflowBudgetChild(t *testing.T) {
	if os.Getenv(budgetChildEnv) != "1" {
		t.Skip("run by TestStackOverflowsStayInBudget")
	}
	h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir, MemoryBudgetMB: overflowBudget, MaxRunning: overflowCalls})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	manifest := `{"name": "overflow", "capabilities": {"timeout": "5m"},
		"tools": [{"name": "run", "description": "Overflows the stack.", "tier": "read_only"}]}`
	tools, _ := load(t, h, ModuleConfig{Path: writeModule(t, stackOverflowModule(), manifest), MaxConcurrency: overflowCalls,
		Grants: Grants{MemoryMB: overflowMemMB, Timeout: Duration(5 * time.Minute)}})
	run := tools["run"]

	runtime.GC()
	debug.FreeOSMemory()
	base := procStatusMB(t, "VmRSS")
	// Reset the peak ("VmHWM") to the current RSS (Linux 4.0+).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset VmHWM: %v", err)
	}
	start := time.Now()
	r := budgetReport{Calls: overflowCalls}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range overflowCalls {
		wg.Go(func() {
			_, err := run.Call(context.Background(), json.RawMessage(`{}`))
			var te *kernel.ToolError
			mu.Lock()
			defer mu.Unlock()
			if !errors.As(err, &te) {
				r.Codes = append(r.Codes, "none")
				return
			}
			r.Codes = append(r.Codes, te.Code)
			if te.Code == "trap" && strings.Contains(err.Error(), "stack overflow") {
				r.Overflows++
			} else if r.FirstError == "" {
				r.FirstError = err.Error()
			}
		})
	}
	wg.Wait()
	r.ElapsedMS = time.Since(start).Milliseconds()
	r.HWMMB = procStatusMB(t, "VmHWM")
	r.BaseMB = base
	r.Waited = h.budget.waited.Load()
	r.PeakMB = h.budget.peak.Load()
	b, _ := json.Marshal(r)
	t.Logf("\nBUDGET-REPORT %s\n", b)
}

// procStatusMB reads a "kB" field of /proc/self/status, in MiB.
func procStatusMB(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb >> 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestMemoryBudget: calls wait for their share of the host's memory budget
// (memory_mb + the stack allowance), never hold more than it at once, fail
// as a timeout naming the budget when their deadline comes first, and a
// module one call of which could never fit is refused at load.
func TestMemoryBudget(t *testing.T) {
	newHost := func(t *testing.T, mb int) *Host {
		h, err := NewHost(context.Background(), HostConfig{CacheDir: testCacheDir, MemoryBudgetMB: mb, MaxRunning: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(context.Background()) })
		return h
	}
	one := DefaultMemoryMB + stackAllowanceMB // one hello call's share

	t.Run("queue", func(t *testing.T) {
		h := newHost(t, one+one/2) // room for one call at a time
		tools, _ := load(t, h, ModuleConfig{Path: writeModule(t, helloModule(), ""), MaxConcurrency: 8})
		// Hold one call's share, so that every call must wait.
		release, err := h.budget.acquire(context.Background(), one)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				res, err := tools["run"].Call(context.Background(), json.RawMessage(`{}`))
				if err == nil && res.Content != "hello" {
					err = errors.New("result " + res.Content)
				}
				errs <- err
			}()
		}
		waitFor(t, "8 calls to wait for the budget", func() bool { return h.budget.waited.Load() >= 8 })
		release()
		for range 8 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if peak := h.budget.peak.Load(); peak > int64(one+one/2) {
			t.Errorf("%d MiB held at once, over the budget", peak)
		}
		if n := h.budget.inUse.Load(); n != 0 {
			t.Errorf("%d MiB still held after every call returned", n)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		h := newHost(t, one)
		tools, _ := load(t, h, ModuleConfig{Path: writeModule(t, helloModule(), "")})
		release, err := h.budget.acquire(context.Background(), one)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = tools["run"].Call(ctx, json.RawMessage(`{}`))
		if te := toolError(t, err); te.Code != "timeout" || !errors.Is(err, ErrMemoryBudget) || !errors.Is(err, kernel.ErrToolTimeout) ||
			!strings.Contains(err.Error(), "limits.wasm_memory_budget_mb") {
			t.Fatalf("code %q, error %v; want a timeout naming the memory budget", te.Code, err)
		}
	})

	t.Run("pools give way to calls", func(t *testing.T) {
		// Room for two instances: a pool of 2 takes both, and a call of
		// another module must still get through.
		h := newHost(t, 2*one)
		pooled, _ := load(t, h, ModuleConfig{Path: reactorWasm, Pool: 2})
		p := pooled["echo"].(*tool).m.pool
		waitFor(t, "the pool to fill", func() bool { return len(p.ready) == 2 })
		hello, _ := load(t, h, ModuleConfig{Path: writeModule(t, helloModule(), "")})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if res, err := hello["run"].Call(ctx, json.RawMessage(`{}`)); err != nil || res.Content != "hello" {
			t.Fatalf("result %q, error %v", res.Content, err)
		}
		if got := pooled.mustCall(t, "echo", `{"text":"hi"}`); got != "hi" {
			t.Fatalf("echo %q", got)
		}
	})

	t.Run("a call that can never fit", func(t *testing.T) {
		h := newHost(t, 256)
		manifest := `{"name": "big", "capabilities": {"memory_mb": 128},
			"tools": [{"name": "run", "description": "Runs.", "tier": "read_only"}]}`
		_, _, err := h.Load(context.Background(), ModuleConfig{Path: writeModule(t, helloModule(), manifest), Grants: Grants{MemoryMB: 128}})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "limits.wasm_memory_budget_mb") {
			t.Fatalf("error %v, want the budget named", err)
		}
	})
}
