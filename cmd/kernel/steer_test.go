package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/provider/openai/openaitest"
)

// TestSteerFromSecondProcess runs a session in this process while a second
// process (`kernel steer`) queues a message during the first generation:
// the message reaches the model once, right after the tool round, and the
// session stores it once.
func TestSteerFromSecondProcess(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	srv := openaitest.NewServer(t,
		openaitest.Text("Hello."),
		openaitest.ToolCall("list_dir", `{"path":"."}`),
		openaitest.Text("Looking at docs/ as you asked."),
	)
	store := t.TempDir()
	var sid string
	var mu sync.Mutex
	n := 0
	target, _ := url.Parse(srv.URL())
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		me := n
		mu.Unlock()
		if me == 2 { // the session's second run is generating: steer it from another process
			cmd := exec.Command(os.Args[0], "steer", "--store", store, sid, "stop: look in docs/ instead")
			cmd.Env = append(os.Environ(), "KERNEL_TEST_MAIN=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("kernel steer: %v\n%s", err, out)
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	args := []string{"--provider", "openai", "--base-url", front.URL + "/v1", "--model", "gpt-test",
		"--workspace", "../../examples/demo/workspace", "--store", store}
	_, errOut, err := cli(t, append([]string{"run"}, append(args, "hi")...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	m := regexp.MustCompile(`session ([0-9a-z]{16})`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no session id in:\n%s", errOut)
	}
	sid = m[1]
	out, errOut, err := cli(t, append([]string{"run", "--session", sid}, append(args, "list the files")...)...)
	if err != nil || !strings.Contains(out, "docs/ as you asked") {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "steer delivered: stop: look in docs/ instead") {
		t.Fatalf("no delivery shown:\n%s", errOut)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if strings.Contains(string(reqs[1].Body), "look in docs/") {
		t.Fatal("delivered before the tool round")
	}
	third := reqs[2].Chat.Messages
	last, prev := third[len(third)-1], third[len(third)-2]
	if last.Role != "user" || string(last.Content) != "stop: look in docs/ instead" || prev.Role != "tool" {
		t.Fatalf("the steering message is not right after the tool round: %+v / %+v", prev, last)
	}
	if c := strings.Count(string(reqs[2].Body), "look in docs/ instead"); c != 1 {
		t.Fatalf("the message is in the request %d times", c)
	}
	show, _, err := cli(t, "sessions", "show", sid, "--store", store)
	if err != nil || strings.Count(show, "look in docs/ instead") != 1 {
		t.Fatalf("stored %d times (%v):\n%s", strings.Count(show, "look in docs/ instead"), err, show)
	}
	if _, _, err := cli(t, "steer", "--store", store, "0000000000000000", "hello?"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("steer to an unknown session: %v", err)
	}
	left, _ := os.ReadDir(filepath.Join(filepath.Dir(store), filepath.Base(store)+"-queue", sid))
	if len(left) != 0 {
		t.Fatalf("queue not empty: %v", left)
	}
}
