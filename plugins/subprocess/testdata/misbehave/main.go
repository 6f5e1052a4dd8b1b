// Command misbehave is a tool plugin that misbehaves on request, for the
// host's failure tests. Flags (set through the plugin's args) select
// behaviour at startup; tools select it per call.
//
//	-stdout-before-serve  print to stdout before sdk.Serve (breaks the handshake)
//	-stdout-noise         print to stdout (os.Stdout and fd 1) from the moment sdk.Serve takes it over
//	-exit-before-serve    write an error to stderr and exit 3 before serving
//	-raw                  serve without the SDK, ignoring the output cap
//	-impostor             announce one TLS certificate in the handshake, serve with another
//	-sleep-child          not a plugin: sleep forever (used as a grandchild)
//
// Build: go build -o misbehave ./plugins/subprocess/testdata/misbehave
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentkernel/agentkernel/sdk"
)

func main() {
	stdoutBefore := flag.Bool("stdout-before-serve", false, "print to stdout before serving")
	noise := flag.Bool("stdout-noise", false, "print to stdout around Serve")
	exitBefore := flag.Bool("exit-before-serve", false, "exit with an error before serving")
	raw := flag.Bool("raw", false, "serve without the SDK")
	impostor := flag.Bool("impostor", false, "announce one TLS certificate and serve with another")
	sleepChild := flag.Bool("sleep-child", false, "sleep forever")
	flag.Parse()

	switch {
	case *sleepChild:
		for {
			time.Sleep(time.Hour)
		}
	case *stdoutBefore:
		fmt.Println("hello from misbehave")
	case *exitBefore:
		fmt.Fprintln(os.Stderr, "misbehave: cannot read its configuration: open /nonexistent: no such file")
		os.Exit(3)
	case *noise:
		// Noise from the moment sdk.Serve has taken stdout over (fd 1 no
		// longer is the host's pipe), racing the handshake line: through
		// the os.Stdout of before Serve, the os.Stdout of the moment, and
		// fd 1.
		before := os.Stdout
		var st syscall.Stat_t
		_ = syscall.Fstat(1, &st)
		go func() {
			for {
				var now syscall.Stat_t
				_ = syscall.Fstat(1, &now)
				if now.Ino != st.Ino || now.Dev != st.Dev {
					break
				}
				time.Sleep(50 * time.Microsecond)
			}
			for i := 0; ; i++ {
				noiseLines.Add(1)
				fmt.Fprintf(before, "noise via the old os.Stdout %d\n", i)
				fmt.Fprintf(os.Stdout, "noise via os.Stdout %d\n", i)
				_, _ = syscall.Write(1, []byte("noise via fd 1\n"))
				time.Sleep(100 * time.Microsecond)
			}
		}()
	case *raw:
		serveRaw()
		return
	case *impostor:
		serveImpostor()
		return
	}
	sdk.Serve(tools()...)
}

// noiseLines counts the rounds of -stdout-noise output so far.
var noiseLines atomic.Int64

type empty struct{}

type textArgs struct {
	Text string `json:"text"`
}

type spawnArgs struct {
	Count int  `json:"count"`
	SDK   bool `json:"sdk"` // use sdk.Command (parent-death signal)
}

type floodArgs struct {
	Bytes int `json:"bytes"`
}

type failArgs struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type progressArgs struct {
	Count int `json:"count"`
}

type procInfo struct {
	PID  int `json:"pid"`
	PGID int `json:"pgid"`
	PPID int `json:"ppid"`
	// NS is the PID namespace ("pid:[4026532…]"): the pids above are in it.
	NS string `json:"ns"`
	// Started tells two processes apart: pids and namespace inodes repeat.
	Started int64 `json:"started"`
}

var started = time.Now().UnixNano()

var spinSink int

const textSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`

// checkMark is mark's side-effect check: the file has the mark, or does
// not exist; anything else cannot be told.
func checkMark(_ context.Context, raw json.RawMessage, _ time.Time) (sdk.SideEffect, string) {
	var a textArgs
	if json.Unmarshal(raw, &a) != nil {
		return sdk.SideEffectUnknown, ""
	}
	b, err := os.ReadFile(a.Text)
	switch {
	case err == nil && string(b) == "marked":
		return sdk.SideEffectCompleted, a.Text + " has the mark"
	case errors.Is(err, fs.ErrNotExist):
		return sdk.SideEffectNotRun, a.Text + " does not exist"
	}
	return sdk.SideEffectUnknown, ""
}

func tools() []*sdk.Tool {
	return []*sdk.Tool{
		sdk.Text(sdk.Spec{Name: "noop", Description: "Does nothing.", Tier: sdk.ReadOnly},
			func(context.Context, empty) (string, error) { return "ok", nil }),
		sdk.Text(sdk.Spec{Name: "mark", Description: "Writes \"marked\" to the file text names.", Schema: textSchema, Tier: sdk.SideEffecting,
			CheckSideEffect: checkMark},
			func(_ context.Context, a textArgs) (string, error) {
				return "marked", os.WriteFile(a.Text, []byte("marked"), 0o600)
			}),
		sdk.Text(sdk.Spec{Name: "echo", Description: "Returns its text.", Schema: textSchema, Tier: sdk.ReadOnly},
			func(_ context.Context, a textArgs) (string, error) { return a.Text, nil }),
		sdk.Text(sdk.Spec{Name: "size", Description: "Returns the length of its text.", Schema: textSchema, Tier: sdk.ReadOnly},
			func(_ context.Context, a textArgs) (string, error) { return fmt.Sprint(len(a.Text)), nil }),
		sdk.JSON(sdk.Spec{Name: "pid", Description: "Returns its process ids.", Tier: sdk.ReadOnly},
			func(context.Context, empty) (procInfo, error) {
				ns, _ := os.Readlink("/proc/self/ns/pid")
				return procInfo{PID: os.Getpid(), PGID: syscall.Getpgrp(), PPID: os.Getppid(), NS: ns, Started: started}, nil
			}),
		sdk.Text(sdk.Spec{Name: "panic", Description: "Panics in the handler.", Schema: textSchema, Tier: sdk.ReadOnly},
			func(_ context.Context, a textArgs) (string, error) { panic(a.Text) }),
		sdk.Text(sdk.Spec{Name: "crash", Description: "Panics in a goroutine: the process dies.", Schema: textSchema, Tier: sdk.ReadOnly},
			func(ctx context.Context, a textArgs) (string, error) {
				go func() { panic(a.Text) }()
				<-ctx.Done()
				return "", ctx.Err()
			}),
		sdk.JSON(sdk.Spec{Name: "hang", Description: "Starts a grandchild, then never returns, ignoring cancellation.", Tier: sdk.ReadOnly},
			func(ctx context.Context, _ empty) ([]int, error) {
				pids, err := spawn(ctx, 1, false)
				if err != nil {
					return nil, err
				}
				sdk.Progressf(ctx, "grandchild %d", pids[0])
				select {}
			}),
		sdk.JSON(sdk.Spec{Name: "spawn", Description: "Starts sleeping grandchildren and returns their pids.", Tier: sdk.SideEffecting},
			func(ctx context.Context, a spawnArgs) ([]int, error) { return spawn(ctx, a.Count, a.SDK) }),
		sdk.Text(sdk.Spec{Name: "flood", Description: "Returns that many bytes.", Tier: sdk.ReadOnly},
			func(_ context.Context, a floodArgs) (string, error) { return strings.Repeat("x", a.Bytes), nil }),
		sdk.JSON(sdk.Spec{Name: "env", Description: "Returns its environment.", Tier: sdk.ReadOnly},
			func(context.Context, empty) ([]string, error) { return os.Environ(), nil }),
		sdk.Text(sdk.Spec{Name: "progress", Description: "Reports progress count times.", Tier: sdk.ReadOnly},
			func(ctx context.Context, a progressArgs) (string, error) {
				for i := 1; i <= a.Count; i++ {
					sdk.Progressf(ctx, "step %d/%d", i, a.Count)
				}
				return "done", nil
			}),
		sdk.Text(sdk.Spec{Name: "print", Description: "Prints to stdout every way it can, then answers.", Tier: sdk.ReadOnly},
			func(ctx context.Context, _ empty) (string, error) {
				fmt.Println("stray line via os.Stdout")
				_, _ = syscall.Write(1, []byte("stray line via fd 1\n"))
				self, err := os.Executable()
				if err != nil {
					return "", err
				}
				c := exec.CommandContext(ctx, self, "-h") // flag usage goes to the child's stderr; fd 1 is inherited
				c.Stdout = nil
				_ = c.Run()
				return "printed", nil
			}),
		sdk.Text(sdk.Spec{Name: "noise", Description: "Returns how many rounds of stdout noise were printed.", Tier: sdk.ReadOnly},
			func(context.Context, empty) (string, error) { return fmt.Sprint(noiseLines.Load()), nil }),
		// The attacks of the sandbox tests: each reports what it managed.
		sdk.Text(sdk.Spec{Name: "read", Description: "Reads a file.", Schema: textSchema, Tier: sdk.ReadOnly},
			func(_ context.Context, a textArgs) (string, error) {
				b, err := os.ReadFile(a.Text)
				return string(b), err
			}),
		sdk.Text(sdk.Spec{Name: "sh", Description: "Runs a shell script, returns its combined output.", Schema: textSchema, Tier: sdk.Privileged},
			func(ctx context.Context, a textArgs) (string, error) {
				c := exec.CommandContext(ctx, "/bin/sh", "-c", a.Text)
				c.Env = []string{"PATH=/usr/bin:/bin"}
				out, err := c.CombinedOutput()
				return fmt.Sprintf("%s[%v]", out, err), nil
			}),
		sdk.Text(sdk.Spec{Name: "hog", Description: "Allocates memory until it dies.", Tier: sdk.ReadOnly},
			func(context.Context, empty) (string, error) {
				// Untouched pages cost address space, not memory: the
				// machine is spared, the address-space limit is not.
				var keep [][]byte
				for {
					keep = append(keep, make([]byte, 64<<20))
				}
			}),
		sdk.Text(sdk.Spec{Name: "spin", Description: "Burns CPU forever.", Tier: sdk.ReadOnly},
			func(context.Context, empty) (string, error) {
				for n := 0; ; n++ {
					spinSink = n
				}
			}),
		sdk.Text(sdk.Spec{Name: "fail", Description: "Returns an error with a code.", Tier: sdk.ReadOnly},
			func(_ context.Context, a failArgs) (string, error) { return "", sdk.Errorf(a.Code, "%s", a.Message) }),
	}
}

// spawn starts count copies of this binary that sleep forever, as
// grandchildren of the host, and returns their pids. Without sdk they get
// no parent-death signal of their own.
func spawn(ctx context.Context, count int, useSDK bool) ([]int, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var pids []int
	for range max(count, 1) {
		var c *exec.Cmd
		if useSDK {
			c = sdk.Command(context.WithoutCancel(ctx), self, "-sleep-child")
		} else {
			c = exec.Command(self, "-sleep-child")
		}
		if err := c.Start(); err != nil {
			return pids, err
		}
		pids = append(pids, c.Process.Pid)
		go func() { _ = c.Wait() }() // reap it if it dies first
	}
	return pids, nil
}
