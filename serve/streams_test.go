package serve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/serve"
)

// holdStream opens an approvals stream for key on a raw connection and
// reads only its status line: an idle client that keeps its slot. It
// returns the status code and the connection (closed at the test's end).
func (r *rig) holdStream(t *testing.T, key string) (int, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /v1/approvals/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", key)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		io.Copy(io.Discard, res.Body)
		c.Close()
	}
	return res.StatusCode, c
}

// TestOneKeyCannotLockOthersOut is issue 36's second finding: a key with
// only `read` opens every stream it can. It is held to its own cap; a
// second reader still gets streams; readers together stop at the part of
// the server's streams that is not reserved; and an approver still opens
// the approvals stream and gets its first event. Without the per-key cap
// the first reader takes every stream; without the reserve the approver
// is locked out.
func TestOneKeyCannotLockOthersOut(t *testing.T) {
	const total, perKey, reserve = 24, 4, 4
	r := newRig(t, rigOpts{limits: serve.Limits{MaxStreams: total, MaxStreamsPerKey: perKey, StreamReserve: reserve}})
	held := 0
	for range 10 {
		if code, _ := r.holdStream(t, r.reader); code == 200 {
			held++
		}
	}
	if held != perKey {
		t.Fatalf("one read key holds %d streams, want its cap %d", held, perKey)
	}
	if p := r.do("GET", "/v1/approvals/stream", r.reader, nil); p.status != 429 || !strings.Contains(string(p.body), "its limit") {
		t.Fatalf("over its cap: %d %s", p.status, p.body)
	}
	readers := []string{}
	for i := range (total - reserve - perKey) / perKey {
		readers = append(readers, r.key(fmt.Sprintf("reader%d", i), "", "read"))
	}
	for _, k := range readers {
		for range perKey {
			if code, _ := r.holdStream(t, k); code != 200 {
				t.Fatalf("another reader was locked out (%d)", code)
			}
		}
	}
	if got := r.srv.Stats().Streams; got != total-reserve {
		t.Fatalf("%d streams open, want %d", got, total-reserve)
	}
	late := r.key("late-reader", "", "read")
	if code, _ := r.holdStream(t, late); code != 429 {
		t.Fatalf("a reader got into the approvers' reserve (%d)", code)
	}
	// The approver: its stream opens and the first event arrives.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/v1/approvals/stream", nil)
	req.Header.Set("Authorization", "Bearer "+r.alice)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("the approver is locked out: %d %s", res.StatusCode, b)
	}
	evs, err := readSSE(res.Body, func(sseEvent) bool { return true })
	if err != nil || len(evs) != 1 || evs[0].typ != "approvals" {
		t.Fatalf("the approver's first event: %v %v", evs, err)
	}
}

// TestStreamMaxAge: a stream that reached its age limit ends with a
// notice to reconnect, and its slot is free again: an idle client cannot
// keep one forever.
func TestStreamMaxAge(t *testing.T) {
	r := newRig(t, rigOpts{limits: serve.Limits{StreamMaxAge: 200 * time.Millisecond}})
	sid := r.newSession(r.alice)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := r.stream(ctx, r.alice, sid, "", nil) // until the server ends it
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evs); n == 0 || evs[n-1].typ != "notice" || !strings.Contains(evs[n-1].data, "age limit") {
		t.Fatalf("the stream ended with %v", evs)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/v1/approvals/stream", nil)
	req.Header.Set("Authorization", "Bearer "+r.alice)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	all, _ := io.ReadAll(res.Body) // ends by itself
	if !strings.Contains(string(all), "age limit") {
		t.Fatalf("the approvals stream ended with %q", all)
	}
	for r.srv.Stats().Streams != 0 {
		if ctx.Err() != nil {
			t.Fatalf("%d streams still counted", r.srv.Stats().Streams)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
