// Command attack is the test fixture of plugins/wasm: one module whose
// tools misbehave on purpose (loop, sleep, exhaust memory, flood output,
// read stdin forever, try to leave the sandbox) and a few honest ones to
// check that the host is still healthy afterwards.
//
// Built twice by `make wasm` (and by the tests if missing):
//
//	GOOS=wasip1 GOARCH=wasm go build -o testdata/attack/attack.wasm ./testdata/attack
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o testdata/reactor/reactor.wasm ./testdata/attack
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/sdk/wasmtool"
)

func init() {
	// A reactor whose initialisation fails or never ends, on request (the
	// pool breaker's tests grant AK_VISIBLE to choose).
	switch os.Getenv("AK_VISIBLE") {
	case "fail-init":
		fmt.Fprintln(os.Stderr, "initialisation fails on purpose")
		os.Exit(3)
	case "hang-init":
		for {
			counter++
		}
	}
	wasmtool.Handle(handle)
	wasmtool.Warm(func() { _ = wasmtool.DecodeArgs([]byte(`{"text": "warm", "code": 0}`), &args{}) })
}

func main() { wasmtool.Main() }

// counter is package state: a fresh instance per call always answers 1.
var counter int

type args struct {
	Op     string `json:"op"`
	Path   string `json:"path"`
	Target string `json:"target"`
	Data   string `json:"data"`
	Code   int    `json:"code"`
	Size   int    `json:"size"`
	Text   string `json:"text"`
}

func handle(req wasmtool.Request) (wasmtool.Result, error) {
	var a args
	if err := wasmtool.DecodeArgs(req.Args, &a); err != nil {
		return wasmtool.Result{}, err
	}
	switch req.Tool {
	case "echo":
		return wasmtool.Text(a.Text), nil
	case "counter":
		counter++
		return wasmtool.Text(fmt.Sprint(counter)), nil
	case "loop":
		for {
			counter++
		}
	case "sleep":
		time.Sleep(time.Hour)
		return wasmtool.Text("woke up after an hour"), nil
	case "memory":
		var hoard [][]byte
		for {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 { // touch every page
				b[i] = byte(i)
			}
			hoard = append(hoard, b)
			counter += len(hoard)
		}
	case "stdin":
		buf := make([]byte, 4096)
		for {
			_, _ = os.Stdin.Read(buf)
		}
	case "stdout_flood":
		line := []byte(strings.Repeat("o", 1023) + "\n")
		for {
			_, _ = os.Stdout.Write(line)
		}
	case "stderr_flood":
		line := []byte(strings.Repeat("e", 1023) + "\n")
		for {
			_, _ = os.Stderr.Write(line)
		}
	case "env":
		env := os.Environ()
		sort.Strings(env)
		return wasmtool.Text(strings.Join(env, "\n")), nil
	case "args":
		return wasmtool.Text(strings.Join(os.Args, " ")), nil
	case "clock":
		start := time.Now()
		time.Sleep(20 * time.Millisecond)
		return wasmtool.JSON(map[string]int64{"unix_ns": start.UnixNano(), "slept_ns": int64(time.Since(start))})
	case "random":
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		return wasmtool.Text(hex.EncodeToString(b)), nil
	case "exit":
		fmt.Fprintln(os.Stderr, "exiting on purpose with code", a.Code)
		os.Exit(a.Code)
	case "panic":
		var m map[string]int
		m["boom"]++ // nil map: a runtime panic the sdk recovers
	case "big":
		return wasmtool.Text(strings.Repeat("b", a.Size)), nil
	case "fs":
		return fsOp(a), nil
	}
	return wasmtool.Result{}, fmt.Errorf("%w %q", wasmtool.ErrUnknownTool, req.Tool)
}

// fsOp performs one file operation and reports the outcome as text:
// "ok: ..." or "error: ...", with is_error set on error.
func fsOp(a args) wasmtool.Result {
	var out string
	var err error
	switch a.Op {
	case "read":
		var b []byte
		b, err = os.ReadFile(a.Path)
		out = string(b)
	case "write":
		err = os.WriteFile(a.Path, []byte(a.Data), 0o644)
	case "append":
		var f *os.File
		if f, err = os.OpenFile(a.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			_, err = f.WriteString(a.Data)
			f.Close()
		}
	case "mkdir":
		err = os.Mkdir(a.Path, 0o755)
	case "remove":
		err = os.Remove(a.Path)
	case "rename":
		err = os.Rename(a.Path, a.Target)
	case "symlink":
		err = os.Symlink(a.Target, a.Path)
	case "link":
		err = os.Link(a.Target, a.Path)
	case "readlink":
		out, err = os.Readlink(a.Path)
	case "chmod":
		err = os.Chmod(a.Path, 0o777)
	case "truncate":
		err = os.Truncate(a.Path, 0)
	case "stat":
		var st fs.FileInfo
		if st, err = os.Stat(a.Path); err == nil {
			out = fmt.Sprintf("%s %d %v", st.Name(), st.Size(), st.Mode())
		}
	case "list":
		var des []fs.DirEntry
		if des, err = os.ReadDir(a.Path); err == nil {
			names := make([]string, len(des))
			for i, d := range des {
				names[i] = d.Name()
			}
			out = strings.Join(names, ",")
		}
	default:
		err = errors.New("unknown op " + a.Op)
	}
	if err != nil {
		return wasmtool.Errorf("error: %v", err)
	}
	return wasmtool.Text("ok: " + out)
}
