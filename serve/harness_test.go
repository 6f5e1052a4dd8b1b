package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/hooks"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/provider/scripted"
	"github.com/agentkernel/agentkernel/kernel/queue"
	"github.com/agentkernel/agentkernel/kernel/replica"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/plugins/builtin"
	"github.com/agentkernel/agentkernel/policy"
	"github.com/agentkernel/agentkernel/serve"
)

// rig is a real `kernel serve` on a loopback port: a real kernel with the
// built-in tools in a temporary workspace, the scripted model, a policy
// that asks before writes, and keys for two owners.
type rig struct {
	t       testing.TB
	kernel  *kernel.Kernel
	srv     *serve.Server
	url     string
	ws      string
	keys    *serve.KeyStore
	store   kernel.Store
	memory  memoryIndex
	alice   string // run, read, approve
	bob     string // another owner, all scopes
	reader  string // alice's tenant? no: its own key, read only
	cancel  context.CancelFunc
	done    chan error
	access  *syncBuffer
	closers []func()
}

// reuseKeys remembers the secrets of a key file's keys, for a rig
// restarted on it or another replica sharing it.
var (
	reuseMu   sync.Mutex
	reuseKeys = map[string][3]string{}
)

type rigOpts struct {
	script string
	// answer, when set, is the whole script instead: one turn with this
	// text, made in Go. The stalled-client tests answer 8 MiB, and
	// gopkg.in/yaml parsing that as a scalar costs tens of seconds
	// under -race (more than the rest of the test); what they check is
	// the stream, not the script's parse (scripted's tests cover that).
	answer  string
	badger  string // store dir; "" means memory
	limits  serve.Limits
	drain   time.Duration
	noStart bool
	// tools are registered beside the built-ins.
	tools []kernel.Tool
	// pg, when set, is the DSN of a PostgreSQL database the rig's store
	// lives in: the rig is one replica (named replica) of the servers on
	// it. ws and keys, when set, are a workspace and a key file shared
	// with other rigs.
	pg         string
	replica    string
	ws, keys   string
	autoResume bool
	leaseTTL   time.Duration
	// reviewer, when set, is the script of a named agent "reviewer" whose
	// surface is read_file alone (Config.Agents).
	reviewer string
	// reviewerTools widen its surface (default read_file alone).
	reviewerTools []string
	// pipeline, when set, adds the pipeline "review" (named agent
	// "pipeline:review"): plan, then correctness and style together, then
	// report, each step an agent of its own with a scripted model
	// (rigPipeline).
	pipeline bool
	// fanout, when set, adds the agents "lead" and "capped", whose model
	// calls agent.worker four times at once, and "worker" (rigFanout).
	fanout bool
	// points are the kernel's lifecycle hooks.
	points kernel.Points
	// allowedHosts is serve.Config.AllowedHosts.
	allowedHosts []string
	// memory serves GET /v1/memory/search from the store's memory index
	// (PostgreSQL's, with pg); the index is r.memory.
	memory bool
}

// defaultScript: turn 1 reads a file, turn 2 writes one (the policy asks),
// turn 3 answers.
const defaultScript = `
steps:
  - text: "Reading."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "Writing."
    tool_calls:
      - name: write_file
        args: {path: notes.txt, content: "hello\nnew line\n"}
  - text: "Done: notes.txt updated."
`

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	return newRigTB(t, o)
}

func newRigTB(t testing.TB, o rigOpts) *rig {
	t.Helper()
	if o.script == "" {
		o.script = defaultScript
	}
	dir := t.TempDir()
	ws := o.ws
	if ws == "" {
		ws = filepath.Join(dir, "ws")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{t: t, ws: ws, access: &syncBuffer{}}
	var store kernel.Store
	var q replica.Queue
	if o.pg != "" {
		ps, err := postgres.Open(context.Background(), o.pg, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r.closers = append(r.closers, func() { ps.Close() })
		store, q = ps, ps.Queue(o.replica)
		if o.memory {
			r.memory = ps.MemoryIndex()
		}
	} else if o.badger != "" {
		bs, err := badger.Open(o.badger, badger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r.closers = append(r.closers, func() { bs.Close() })
		store = bs
		if o.memory {
			ix, err := bleveindex.Open(o.badger + "-memory")
			if err != nil {
				t.Fatal(err)
			}
			r.closers = append(r.closers, func() { ix.Close() })
			r.memory = ix
		}
	} else {
		store = memory.New()
	}
	r.store = store
	tools, closer, err := builtin.New(builtin.Config{Root: ws, Enable: []string{"read_file", "write_file", "edit_file", "list_dir"}})
	if err != nil {
		t.Fatal(err)
	}
	r.closers = append(r.closers, func() { closer.Close() })
	reg := kernel.NewRegistry()
	if err := reg.Register(append(tools, o.tools...)...); err != nil {
		t.Fatal(err)
	}
	pw, err := policy.NewWatcher(context.Background(), policy.WatcherConfig{Path: "testdata/policy.yaml", Options: policy.Options{Tools: reg.Specs()}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scripted.Parse("script.yaml", []byte(o.script))
	if err != nil {
		t.Fatal(err)
	}
	if o.answer != "" {
		sc = &scripted.Script{Name: "answer", Turns: []scripted.Turn{{Text: o.answer}}}
	}
	scrubber, err := hooks.NewScrubber(hooks.ScrubberConfig{})
	if err != nil {
		t.Fatal(err)
	}
	scrub := func(s string) string { out, _ := scrubber.Scrub(s); return out }
	if q == nil {
		if q, err = queue.Open(filepath.Join(dir, "queue"), nil); err != nil {
			t.Fatal(err)
		}
	}
	k, err := kernel.New(kernel.Config{Provider: scripted.New(sc), Store: store, Tools: reg, Policy: pw, Model: "scripted", Inbox: q, Points: o.points, ScrubInput: scrub})
	if err != nil {
		t.Fatal(err)
	}
	r.kernel = k
	keysPath := filepath.Join(dir, "keys", "keys.json")
	if o.badger != "" {
		keysPath = o.badger + "-keys.json"
	}
	if o.keys != "" {
		keysPath = o.keys
	}
	r.keys, err = serve.OpenKeys(keysPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	reuseMu.Lock()
	defer reuseMu.Unlock()
	if ks, _ := r.keys.List(); len(ks) > 0 { // a restart, or another replica: the keys are there
		r.alice, r.bob, r.reader = reuseKeys[keysPath][0], reuseKeys[keysPath][1], reuseKeys[keysPath][2]
	}
	if r.alice == "" {
		r.alice = r.key("alice", "", "run", "read", "approve")
		r.bob = r.key("bob", "", "admin")
		r.reader = r.key("reader", "", "read")
		reuseKeys[keysPath] = [3]string{r.alice, r.bob, r.reader}
	}
	var named []serve.Agent
	if o.reviewer != "" {
		rreg := kernel.NewRegistry()
		for _, t := range tools {
			if n := t.Spec().Name; n == "read_file" || slices.Contains(o.reviewerTools, n) {
				if err := rreg.Register(t); err != nil {
					r.t.Fatal(err)
				}
			}
		}
		rsc, err := scripted.Parse("reviewer.yaml", []byte(o.reviewer))
		if err != nil {
			t.Fatal(err)
		}
		rk, err := kernel.New(kernel.Config{Provider: scripted.New(rsc), Store: store, Tools: rreg, Policy: pw, Model: "scripted", Inbox: q, Agent: "reviewer"})
		if err != nil {
			t.Fatal(err)
		}
		named = append(named, serve.Agent{Name: "reviewer", Kind: "agent", Description: "Reads, never writes.", Model: "scripted", Kernel: rk})
	}
	if o.fanout {
		named = append(named, rigFanout(t, kernel.Config{Store: store, Policy: pw, Inbox: q}, tools)...)
	}
	if o.pipeline {
		named = append(named, rigPipeline(t, kernel.Config{Store: store, Policy: pw, Model: "scripted", Inbox: q}, tools))
	}
	var searcher serve.MemorySearcher
	if r.memory != nil {
		searcher = serve.TextSearch(r.memory)
	}
	r.srv, err = serve.New(serve.Config{Memory: searcher, Kernel: k, Store: store, Queue: q, Keys: r.keys, Policy: pw, Agents: named,
		Scrub: scrub, AccessLog: r.access, ErrorLog: testWriter{t}, Limits: o.limits, DrainTimeout: o.drain, Version: "test",
		Replica: o.replica, LeaseTTL: o.leaseTTL, Poll: 100 * time.Millisecond, AutoResume: o.autoResume, AllowedHosts: o.allowedHosts})
	if err != nil {
		t.Fatal(err)
	}
	if !o.noStart {
		r.start()
	}
	t.Cleanup(r.close)
	return r
}

// key creates a key, or finds an existing one with the same name (a
// restarted rig reuses the key file).
func (r *rig) key(name, tenant string, scopes ...string) string {
	r.t.Helper()
	_, secret, err := r.keys.Create(name, tenant, scopes)
	if err != nil {
		r.t.Fatal(err)
	}
	return secret
}

func (r *rig) start() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	r.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan error, 1)
	go func() { r.done <- r.srv.Serve(ctx, ln, nil) }()
}

// stop drains the server (as SIGTERM does) and returns Serve's error.
func (r *rig) stop() error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	return <-r.done
}

func (r *rig) close() {
	if err := r.stop(); err != nil {
		r.t.Errorf("serve: %v", err)
	}
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// resp is an HTTP answer.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (p resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(p.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, p.body)
	}
	return m
}

// doNoCheck is do without the OpenAPI check (for goroutines: the check
// may call t.Fatal).
func (r *rig) doNoCheck(method, path, key string, body any) resp {
	return r.send(method, path, key, body, false)
}

// do sends a request with key (none when empty) and a JSON body (none
// when nil; a string is sent as is).
func (r *rig) do(method, path, key string, body any) resp {
	r.t.Helper()
	return r.send(method, path, key, body, true)
}

func (r *rig) send(method, path, key string, body any, check bool) resp {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			j, err := json.Marshal(b)
			if err != nil {
				r.t.Fatal(err)
			}
			rd = bytes.NewReader(j)
		}
	}
	req, err := http.NewRequest(method, r.url+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	out := resp{status: res.StatusCode, header: res.Header, body: b}
	if check {
		checkAgainstOpenAPI(r.t, method, path, out)
	}
	return out
}

// must is do expecting status.
func (r *rig) must(status int, method, path, key string, body any) map[string]any {
	r.t.Helper()
	p := r.do(method, path, key, body)
	if p.status != status {
		r.t.Fatalf("%s %s = %d, want %d: %s", method, path, p.status, status, p.body)
	}
	if len(p.body) == 0 {
		return nil
	}
	return p.json(r.t)
}

// newSession creates a session for key.
func (r *rig) newSession(key string) string {
	r.t.Helper()
	return r.must(201, "POST", "/v1/sessions", key, map[string]any{"title": "t"})["id"].(string)
}

// waitStatus polls the session until its status is want.
func (r *rig) waitStatus(key, sid, want string) map[string]any {
	r.t.Helper()
	// A bound on a hang, not a speed claim: an 8 MiB run under -race on a
	// loaded 2-core machine has taken over 30 s to go idle.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s := r.must(200, "GET", "/v1/sessions/"+sid, key, nil)
		if s["status"] == want && s["active_run"] == nil {
			return s
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("session %s is %v, want %s: %v", sid, s["status"], want, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id   string
	typ  string
	data string
}

// stream reads a session's event stream until stop says so (or the
// stream ends), with lastID as Last-Event-ID ("" for none).
func (r *rig) stream(ctx context.Context, key, sid, lastID string, stop func(sseEvent) bool) ([]sseEvent, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", r.url+"/v1/sessions/"+sid+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return nil, fmt.Errorf("events: %d %s", res.StatusCode, b)
	}
	return readSSE(res.Body, stop)
}

// readSSE parses a text/event-stream body.
func readSSE(body io.Reader, stop func(sseEvent) bool) ([]sseEvent, error) {
	var out []sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 64<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
				if stop != nil && stop(cur) {
					return out, nil
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data += line[6:]
		}
	}
	return out, sc.Err()
}

func seqOf(t testing.TB, e sseEvent) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(e.id, 10, 64)
	if err != nil {
		t.Fatalf("event id %q: %v", e.id, err)
	}
	return n
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// gateTool is a read-only tool that blocks until its gate opens (or the
// call is cancelled), and says when a call started.
func gateTool(name string, gate <-chan struct{}, started chan<- struct{}) kernel.Tool {
	return kernel.NewTool(kernel.ToolSpec{Name: name, Description: "waits", Tier: kernel.TierReadOnly, Source: "test",
		Schema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			if started != nil {
				select {
				case started <- struct{}{}:
				default:
				}
			}
			select {
			case <-gate:
				return kernel.Result{Content: "gate open"}, nil
			case <-ctx.Done():
				return kernel.Result{}, ctx.Err()
			}
		})
}

// streamAfter is stream with ?after=N instead of Last-Event-ID, until
// run.completed.
func (r *rig) streamAfter(ctx context.Context, key, sid, after string) ([]sseEvent, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", r.url+"/v1/sessions/"+sid+"/events?after="+after, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return readSSE(res.Body, func(e sseEvent) bool { return e.typ == "run.completed" })
}

// rawStream opens a session's event stream on a raw connection and
// returns it unread.
func (r *rig) rawStream(t *testing.T, key, sid string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(c, "GET /v1/sessions/%s/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", sid, key)
	return c
}

func serveLimits(write time.Duration) serve.Limits { return serve.Limits{WriteTimeout: write} }

func serveLimitsRuns(total, perKey int) serve.Limits {
	return serve.Limits{MaxRuns: total, MaxRunsPerKey: perKey}
}
