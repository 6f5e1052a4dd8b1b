package serve_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/serve"
)

// TestRevocationClosesStreamsOnEveryReplica is issue 36's third finding:
// a key's open streams on two replicas (an approvals stream on one, a
// session's event stream on the other) end once the key is revoked with
// another process's KeyStore on the shared key file, as `kernel keys
// revoke` does, and a new connection is refused. Without the key watcher
// both streams stay open and keep receiving the team's new approvals.
func TestRevocationClosesStreamsOnEveryReplica(t *testing.T) {
	a, b := pair(t, rigOpts{})
	watcher := a.key("watcher", "team", "read", "approve")
	runner := a.key("runner", "team", "run", "read", "approve")
	sid := a.newSession(runner)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for b.doNoCheck("GET", "/v1/whoami", watcher, nil).status != 200 { // b rereads the file within a second
		if ctx.Err() != nil {
			t.Fatal("replica b never saw the new key")
		}
		time.Sleep(50 * time.Millisecond)
	}
	type ended struct {
		first bool
		err   error
	}
	open := func(r *rig, path string) <-chan ended {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", r.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+watcher)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 {
			b, _ := io.ReadAll(res.Body)
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
		}
		first := make(chan struct{})
		done := make(chan ended, 1)
		go func() {
			defer res.Body.Close()
			got := false
			_, err := readSSE(res.Body, func(sseEvent) bool {
				if !got {
					got = true
					close(first)
				}
				return false // read to the end
			})
			done <- ended{got, err}
		}()
		if path == "/v1/approvals/stream" {
			<-first
		}
		return done
	}
	inbox := open(b, "/v1/approvals/stream")
	events := open(a, "/v1/sessions/"+sid+"/events")
	if a.srv.Stats().Streams != 1 || b.srv.Stats().Streams != 1 {
		t.Fatalf("streams open: a %d, b %d", a.srv.Stats().Streams, b.srv.Stats().Streams)
	}

	cli, err := serve.OpenKeys(a.keys.Path(), nil) // another process: kernel keys revoke
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke("watcher"); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan ended{"b's approvals stream": inbox, "a's event stream": events} {
		select {
		case e := <-ch:
			if e.err != nil && ctx.Err() != nil {
				t.Fatalf("%s: %v", name, e.err)
			}
		case <-ctx.Done():
			t.Fatalf("%s is still open after the key was revoked", name)
		}
	}
	// And what the team does next reaches no stream of the key.
	a.must(202, "POST", "/v1/sessions/"+sid+"/runs", runner, map[string]any{"prompt": "update notes"})
	a.waitStatus(runner, sid, "awaiting_approval")
	for _, r := range []*rig{a, b} {
		if n := r.srv.Stats().Streams; n != 0 {
			t.Errorf("%d streams still counted", n)
		}
		r.must(401, "GET", "/v1/approvals/stream", watcher, nil)
	}
}
