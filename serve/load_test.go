package serve_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/serve"
)

// loadScript: three turns, two of them with tool calls.
const loadScript = `
steps:
  - text: "Listing the workspace."
    tool_calls:
      - name: list_dir
        args: {path: "."}
  - text: "Reading the notes."
    tool_calls:
      - name: read_file
        args: {path: notes.txt}
  - text: "The notes say hello; that is all there is."
`

// TestLoad: 200 sessions at once, each a 3-turn run with tool calls over
// HTTP, each watched by its own event stream: no
// request fails, every stream carries exactly the session's stored
// events (no loss, no repeat, in order), and once they are done the server
// holds nothing for them and the heap is back near where it started.
func TestLoad(t *testing.T) {
	const n = 200
	r := newRig(t, rigOpts{script: loadScript, badger: filepath.Join(t.TempDir(), "store"),
		limits: serve.Limits{MaxRuns: n, MaxRunsPerKey: n, MaxStreams: 2 * n, MaxStreamsPerKey: 2 * n}})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sids := make([]string, n)
	streams := make([][]sseEvent, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := func() error {
				p := r.doNoCheck("POST", "/v1/sessions", r.alice, map[string]any{"title": "load " + strconv.Itoa(i)})
				if p.status != 201 {
					return fmt.Errorf("create: %d %s", p.status, p.body)
				}
				sid := p.json(t)["id"].(string)
				sids[i] = sid
				got := make(chan error, 1)
				go func() { // from the first event on, whenever it connects
					evs, err := r.stream(ctx, r.alice, sid, "", func(e sseEvent) bool {
						return e.typ == "run.completed" || e.typ == "run.failed"
					})
					streams[i] = evs
					got <- err
				}()
				p = r.doNoCheck("POST", "/v1/sessions/"+sid+"/runs", r.alice, map[string]any{"prompt": "what is in the notes?"})
				if p.status != 202 {
					return fmt.Errorf("run: %d %s", p.status, p.body)
				}
				return <-got
			}(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	el := r.store.(kernel.EventLog)
	for i, sid := range sids {
		stored, err := el.ReadEvents(ctx, sid, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got := streams[i]
		if len(got) != len(stored) {
			t.Fatalf("session %d: stream %d events, store %d", i, len(got), len(stored))
		}
		for j := range got {
			if got[j].id != strconv.FormatUint(stored[j].Seq, 10) || got[j].data != string(stored[j].Data) {
				t.Fatalf("session %d event %d: streamed %s, stored %d", i, j, got[j].id, stored[j].Seq)
			}
		}
		if last := got[len(got)-1]; last.typ != "run.completed" {
			t.Fatalf("session %d ended with %s: %s", i, last.typ, last.data)
		}
	}
	// Nothing is left behind.
	deadline := time.Now().Add(10 * time.Second)
	for st := r.srv.Stats(); st.Runs+st.Streams+st.Topics > 0; st = r.srv.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after the load the server still holds %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use: %d MiB before, %d MiB after %d runs", before.HeapInuse>>20, after.HeapInuse>>20, n)
	if grew > 256<<20 {
		t.Fatalf("the heap grew by %d MiB over the load and stayed", grew>>20)
	}
}
