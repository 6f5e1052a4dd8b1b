package serve_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/serve"
)

// TestDNSRebinding is issue 36's sixth finding, first part: a page of
// another site whose DNS name now resolves to the server (DNS rebinding)
// sends its own name as Host. Every endpoint refuses it — the
// unauthenticated ones (/healthz, /readyz, the OpenAPI document, the page)
// included — while IP addresses, localhost and the names the server was
// given pass. Without the Host check each of these answers 200.
func TestDNSRebinding(t *testing.T) {
	r := newRig(t, rigOpts{allowedHosts: []string{"kernel.corp.example"}})
	port := r.url[strings.LastIndex(r.url, ":"):]
	get := func(host, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", r.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz", "/v1/openapi.json", "/", "/v1/sessions"} {
		for _, host := range []string{"attacker.example" + port, "attacker.example", "127.0.0.1.attacker.example" + port, "localhost.attacker.example" + port} {
			if code, body := get(host, path); code != 403 || !strings.Contains(body, "host_not_allowed") {
				t.Errorf("Host %s GET %s = %d %.80s, want 403 host_not_allowed", host, path, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port, "app.localhost" + port, "kernel.corp.example", "KERNEL.corp.example." + port} {
		if code, body := get(host, "/healthz"); code != 200 {
			t.Errorf("Host %s GET /healthz = %d %.80s, want 200", host, code, body)
		}
	}
}

// failingStore is a store whose database is down, with an error that
// names it the way a PostgreSQL driver does.
type failingStore struct{ *memory.Store }

func (failingStore) Load(context.Context, string) (*kernel.Session, error) {
	return nil, errors.New("failed to connect to `user=kernel database=sessions`: 10.1.2.3:5432 (db.internal): dial error")
}

// TestReadyzHidesTheDatabase: /readyz answers without a key, so while the
// store is down it says "unavailable" and nothing of the database's
// address, user or name; the server's own log has the error.
func TestReadyzHidesTheDatabase(t *testing.T) {
	mem := memory.New()
	sc, err := scripted.Parse("s.yaml", []byte("steps:\n  - text: hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Provider: scripted.New(sc), Store: mem, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.Open(filepath.Join(t.TempDir(), "q"), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := serve.OpenKeys(filepath.Join(t.TempDir(), "keys.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var logged syncBuffer
	srv, err := serve.New(serve.Config{Kernel: k, Store: failingStore{mem}, Queue: q, Keys: keys, ErrorLog: &logged})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/readyz", nil)
	req.Host = "127.0.0.1:8080"
	srv.Handler().ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Code != 503 || !strings.Contains(body, `"store":"unavailable"`) {
		t.Fatalf("readyz = %d %s", rec.Code, body)
	}
	for _, leak := range []string{"10.1.2.3", "5432", "db.internal", "user=kernel", "sessions"} {
		if strings.Contains(body, leak) {
			t.Errorf("readyz shows %q: %s", leak, body)
		}
	}
	if !strings.Contains(logged.String(), "db.internal") {
		t.Errorf("the server log lacks the error: %q", logged.String())
	}
}
