package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/serve"
)

// TestServeDocsKeyFile: the opening example of docs/serve.md creates its
// key with the same configuration the server then runs with, so the key
// lands in the key file that `kernel serve --config kernel.yaml` reads
// (beside kernel.yaml's store), not in the default store's.
func TestServeDocsKeyFile(t *testing.T) {
	b, err := os.ReadFile("../../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	block := shBlock.FindStringSubmatch(string(b))
	if block == nil {
		t.Fatal("docs/serve.md has no sh block")
	}
	var create, srv []string
	for _, line := range strings.Split(block[1], "\n") {
		switch w := shellWords(strings.TrimSpace(line)); {
		case len(w) > 2 && w[0] == "kernel" && w[1] == "keys" && w[2] == "create":
			create = w[1:]
		case len(w) > 1 && w[0] == "kernel" && w[1] == "serve":
			srv = w[1:]
		}
	}
	if create == nil || srv == nil {
		t.Fatalf("docs/serve.md's first block lacks `kernel keys create` or `kernel serve`:\n%s", block[1])
	}
	// The flags that choose the key file must be the server's.
	pick := func(args []string) []string {
		var out []string
		for i := 0; i < len(args)-1; i++ {
			if args[i] == "--config" || args[i] == "--store" || args[i] == "--keys" {
				out = append(out, args[i], args[i+1])
			}
		}
		return out
	}
	if got, want := strings.Join(pick(create), " "), strings.Join(pick(srv), " "); got != want || want == "" {
		t.Fatalf("docs/serve.md: `kernel %s` chooses its key file with %q, the server with %q", strings.Join(create, " "), got, want)
	}

	// Run it where kernel.yaml is, and find the key where the server looks.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "kernel.yaml"), []byte("store: {dir: sessions}\n"), 0o600)
	t.Chdir(dir)
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "xdg"))
	out, _, err := cli(t, create...)
	if err != nil {
		t.Fatalf("kernel %s: %v", strings.Join(create, " "), err)
	}
	cf := commonFlags{config: stringList{"kernel.yaml"}}
	cfg, err := cf.load()
	if err != nil {
		t.Fatal(err)
	}
	path, err := cfg.keysPath("")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := serve.OpenKeys(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := ks.Authenticate(strings.TrimSpace(out)); !ok || k.Name != create[2] {
		t.Fatalf("the server's key file %s does not hold the key the docs created (%v, %v)", path, k, ok)
	}
	if _, err := os.Stat(filepath.Join(dir, "xdg")); err == nil {
		t.Errorf("the docs' command wrote into the default store's directory too")
	}
}

// TestServeDemoPrintsTheKeyCommand: `make serve` (examples/serve/run.sh)
// prints the command that adds a key to the server it started, and that
// command, run as printed, makes a key the running server accepts.
func TestServeDemoPrintsTheKeyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kernel serve")
	}
	root := artifacts(t, "bin/kernel")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl (which the demo script uses) is not installed: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	demo := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("bash", filepath.Join(root, "examples/serve/run.sh"))
	cmd.Env = append(os.Environ(), "LISTEN="+addr, "DEMO_DIR="+demo)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = io.Discard
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	var printed []string
	sc := bufio.NewScanner(stdout)
	keyCmd := regexp.MustCompile(`^\s+(\S+/kernel keys create NAME .*--keys \S+)\s*$`)
	var line string
	for sc.Scan() {
		printed = append(printed, sc.Text())
		if m := keyCmd.FindStringSubmatch(sc.Text()); m != nil {
			line = m[1]
			break
		}
	}
	if line == "" {
		t.Fatalf("the demo printed no command to create another key:\n%s", strings.Join(printed, "\n"))
	}
	args := strings.Fields(strings.Replace(line, "NAME", "second", 1))
	secret, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	// The running server rereads the key file: the new key works without
	// a restart. Wait for its effect (a 200), not for a time.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(secret)))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the key made by %q is not accepted by the demo's server (last: %v)", line, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
