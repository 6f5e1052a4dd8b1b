package serve_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/serve"
)

// slowLoad is a store whose Load waits for the caller to give up, as a
// slow database does, and then fails with the caller's reason.
type slowLoad struct {
	*memory.Store
	loading chan struct{}
}

func (s *slowLoad) Load(ctx context.Context, id string) (*kernel.Session, error) {
	close(s.loading)
	<-ctx.Done()
	return nil, ctx.Err()
}

// LoadHead waits as Load does: a stream's start reads the session's head
// (kernel.SessionHeadLoader, which memory.Store has).
func (s *slowLoad) LoadHead(ctx context.Context, id string) (*kernel.Session, error) {
	return s.Load(ctx, id)
}

// TestClientGoneIsNot500: a client that disconnects while its request
// waits for the store (an event stream loading its session) is recorded
// as 499 in the access log, with nothing in the error log: it is not a
// server error.
func TestClientGoneIsNot500(t *testing.T) {
	st := &slowLoad{Store: memory.New(), loading: make(chan struct{})}
	dir := t.TempDir()
	q, err := queue.Open(filepath.Join(dir, "queue"), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(), Store: st, Inbox: q})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := serve.OpenKeys(filepath.Join(dir, "keys.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := keys.Create("alice", "", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	var access, errs syncBuffer
	srv, err := serve.New(serve.Config{Kernel: k, Store: st, Queue: q, Keys: keys, AccessLog: &access, ErrorLog: &errs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("GET", "/v1/sessions/s1/events", nil).WithContext(ctx)
	req.Host = "127.0.0.1:8080" // a name the server answers (not httptest's example.com)
	req.Header.Set("Authorization", "Bearer "+secret)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { srv.Handler().ServeHTTP(rec, req); close(done) }()
	select {
	case <-st.loading:
	case <-done:
		t.Fatalf("answered %d before loading the session: %s", rec.Code, rec.Body)
	}
	cancel() // the client goes away
	<-done
	if !strings.Contains(access.String(), `"status":499`) {
		t.Fatalf("access log %q: want status 499 (client closed request)", access.String())
	}
	if errs.String() != "" {
		t.Fatalf("error log %q: a client going away is not a server error", errs.String())
	}
	if rec.Code == http.StatusInternalServerError {
		t.Fatal("answered 500")
	}
}
