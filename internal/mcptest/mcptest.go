// Package mcptest builds the MCP test server (./server, written with the
// official Go SDK) for the tests of the kernel's MCP client and server. The
// binary is built from this module, so tests do not depend on anything
// outside it.
package mcptest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

const serverPkg = "github.com/agentkernel/agentkernel/internal/mcptest/server"

var (
	once     sync.Once
	binPath  string
	buildErr error
)

// Server builds the test server once per test binary and returns its path.
func Server(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, err := os.MkdirTemp("", "mcptest-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "mcp-testserver")
		buildErr = Build(binPath)
	})
	if buildErr != nil {
		t.Fatalf("build the MCP test server: %v", buildErr)
	}
	return binPath
}

// Build builds the test server to out.
func Build(out string) error {
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		goCmd = "go"
	}
	// -trimpath and CGO_ENABLED=0, as sdktest.BuildTo builds the test
	// plugins: the server's packages (net/http and the standard library
	// under it) are compiled once for both in a cold `make test`
	// (RATIONALE.md, "One build configuration per binary kind (issue 45)").
	cmd := exec.Command(goCmd, "build", "-trimpath", "-o", out, serverPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", serverPkg, err, b)
	}
	return nil
}

// StartHTTP runs the test server over streamable HTTP on 127.0.0.1 with
// args and returns its URL; the server is killed when the test ends.
func StartHTTP(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(Server(t), append([]string{"-http", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case u := <-line:
		if !strings.HasPrefix(u, "http://") {
			t.Fatalf("test server printed %q, want its URL", u)
		}
		return u
	case <-time.After(60 * time.Second):
		t.Fatal("the MCP test server did not print its URL within 60s")
	}
	return ""
}

// WaitFor polls cond every 20ms until it holds or 30s pass.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
