//go:build unix

package badger

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

var long = flag.Bool("long", false, "run the long crash test (500 kills instead of 50)")

// crashIterations is 50, 500 with -long, or $AGENTKERNEL_CRASH_ITERATIONS.
func crashIterations(t *testing.T) int {
	if v := os.Getenv("AGENTKERNEL_CRASH_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AGENTKERNEL_CRASH_ITERATIONS=%q: want a positive number", v)
		}
		return n
	}
	if *long {
		return 500
	}
	return 50
}

// ack is one step the helper reported as committed.
type ack struct {
	id          string
	first, last uint64
	digest      uint64
}

func parseAck(line string) (ack, bool) {
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != "ack" {
		return ack{}, false
	}
	first, err1 := strconv.ParseUint(f[2], 10, 64)
	last, err2 := strconv.ParseUint(f[3], 10, 64)
	d, err3 := strconv.ParseUint(f[4], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return ack{}, false
	}
	return ack{id: f[1], first: first, last: last, digest: d}, true
}

// TestCrash kills a process running tool-using sessions through the real
// kernel loop with SIGKILL at random points, again and again on the same
// store. After every kill: the store opens; every session loads; tool
// calls lack a result only at the very end of a session, and once the
// kernel's repair has run none does; and every step the helper saw
// acknowledged is there, byte for byte.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	t.Parallel()
	iterations := crashIterations(t)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d iterations", seed, iterations)
	rng := rand.New(rand.NewPCG(seed, 0))
	acked := map[string][]ack{}
	var total, repaired, early, large int
	for i := range iterations {
		got, err := killHelper(t, dir, seed+uint64(i), rng)
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if len(got) == 0 {
			early++
		}
		for _, a := range got {
			acked[a.id] = append(acked[a.id], a)
			if a.last-a.first+1 >= 24 {
				large++
			}
		}
		total += len(got)
		n, err := verifyAfterCrash(dir, acked)
		if err != nil {
			t.Fatalf("iteration %d (seed %d): %v", i, seed, err)
		}
		repaired += n
	}
	t.Logf("%d kills, %d acknowledged steps (%d larger than a transaction) in %d sessions, %d kills before any ack, %d sessions repaired",
		iterations, total, large, len(acked), early, repaired)
	// Every iteration is two processes (the killed writer, the verifying
	// open): the store must not grow a table per process. Value logs are
	// only reported: here (a 2 MiB memtable, so a 300 KiB value
	// threshold) a process that writes a round of 24 results of 15 KiB
	// keeps a value-log file of its own while that round is live.
	size, files := StoreSize(dir)
	sst, vlog, biggest := countFiles(t, dir)
	t.Logf("store after %d processes: %.1f MiB allocated in %d files (%d tables, %d value logs, largest value log %d bytes apparent)",
		2*iterations, float64(size)/(1<<20), files, sst, vlog, biggest)
	if limit := tableSlack + 8 + int(2*size/(2<<20)); sst > limit {
		t.Errorf("%d tables after %d processes; want at most %d", sst, 2*iterations, limit)
	}
}

// killHelper starts the crash helper, waits for a random number of acks
// (or, one time in eight, a random few milliseconds from the start),
// kills it with SIGKILL and returns every ack it wrote.
func killHelper(t *testing.T, dir string, seed uint64, rng *rand.Rand) ([]ack, error) {
	cmd := helperCmd(t, "crash", "STORE_DIR="+dir, fmt.Sprintf("SEED=%d", seed))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1024)
	readDone := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		readDone <- sc.Err()
	}()
	var acks []ack
	take := func(line string) error {
		a, ok := parseAck(line)
		if !ok {
			return fmt.Errorf("helper wrote %q", line)
		}
		acks = append(acks, a)
		return nil
	}
	want := 1 + rng.IntN(16)
	var deadline <-chan time.Time
	if rng.IntN(8) == 0 {
		want = -1
		deadline = time.After(time.Duration(rng.IntN(40)) * time.Millisecond)
	}
	timeout := time.After(30 * time.Second)
	exited := false
wait:
	for len(acks) != want {
		select {
		case line, ok := <-lines:
			if !ok {
				exited = true
				break wait
			}
			if err := take(line); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return nil, err
			}
		case <-deadline:
			break wait
		case <-timeout:
			break wait
		}
	}
	if !exited {
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}
	for line := range lines { // what the helper wrote before it died
		if err := take(line); err != nil {
			_ = cmd.Wait()
			return nil, err
		}
	}
	if err := <-readDone; err != nil && err != io.EOF {
		return nil, err
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return nil, fmt.Errorf("helper ended by itself (%v) after %d acks:\n%s", err, len(acks), stderr.String())
	}
	return acks, nil
}

// verifyAfterCrash opens the store and checks every session and every
// ack; sessions with dangling tool calls are resumed through the kernel
// (which repairs them) and checked again. It returns how many sessions
// were repaired.
func verifyAfterCrash(dir string, acked map[string][]ack) (int, error) {
	ctx := context.Background()
	s, err := Open(dir, crashOptions())
	if err != nil {
		return 0, fmt.Errorf("open after kill: %w", err)
	}
	defer s.Close()
	list, err := s.List(ctx)
	if err != nil {
		return 0, err
	}
	listed := map[string]bool{}
	var dangling []string
	for _, m := range list {
		listed[m.ID] = true
		if c := m.Labels[kernel.LabelCorrupt]; c != "" {
			return 0, fmt.Errorf("session %s listed as corrupt: %s", m.ID, c)
		}
		se, err := s.Load(ctx, m.ID)
		if err != nil {
			return 0, err
		}
		open, err := checkToolResults(se.Messages)
		if err != nil {
			return 0, fmt.Errorf("session %s before repair: %w", m.ID, err)
		}
		if open > 0 {
			dangling = append(dangling, m.ID)
		}
		if err := checkAcks(se, acked[m.ID]); err != nil {
			return 0, err
		}
	}
	for id, acks := range acked {
		if !listed[id] {
			return 0, fmt.Errorf("session %s: %d acknowledged steps, but the session is gone", id, len(acks))
		}
	}
	for _, id := range dangling {
		k, err := kernel.New(kernel.Config{Provider: kerneltest.NewProvider(kerneltest.Text("resumed")), Store: s})
		if err != nil {
			return 0, err
		}
		before, err := s.Load(ctx, id)
		if err != nil {
			return 0, err
		}
		if _, err := k.Run(ctx, id, "after the crash"); err != nil {
			return 0, fmt.Errorf("resume %s: %w", id, err)
		}
		se, err := s.Load(ctx, id)
		if err != nil {
			return 0, err
		}
		if open, err := checkToolResults(se.Messages); err != nil || open > 0 {
			return 0, fmt.Errorf("session %s after repair: %d calls without a result, %v", id, open, err)
		}
		for _, m := range se.Messages[len(before.Messages):] {
			if m.Role == kernel.RoleTool && m.Content != kernel.Interrupted {
				return 0, fmt.Errorf("session %s: repair wrote %q, want kernel.Interrupted", id, m.Content)
			}
		}
	}
	return len(dangling), s.Close()
}

// checkToolResults checks that every tool message answers a call of the
// assistant message before it, once, and that calls lack a result only
// after the last assistant message. It returns how many do.
func checkToolResults(msgs []kernel.Message) (open int, err error) {
	pending := map[string]bool{}
	for _, m := range msgs {
		switch m.Role {
		case kernel.RoleTool:
			if !pending[m.ToolCallID] {
				return 0, fmt.Errorf("message %d answers call %q, which is not awaiting a result", m.Seq, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
		default:
			if len(pending) > 0 {
				return 0, fmt.Errorf("message %d (%s) follows %d calls without a result", m.Seq, m.Role, len(pending))
			}
			for _, c := range m.ToolCalls {
				pending[c.ID] = true
			}
		}
	}
	return len(pending), nil
}

// checkAcks checks that every acknowledged step of the session is stored
// unchanged.
func checkAcks(se *kernel.Session, acks []ack) error {
	for _, a := range acks {
		if a.last > uint64(len(se.Messages)) {
			return fmt.Errorf("session %s: acknowledged messages %d..%d, but only %d are stored", a.id, a.first, a.last, len(se.Messages))
		}
		if d := digest(se.Messages[a.first-1 : a.last]); d != a.digest {
			return fmt.Errorf("session %s: messages %d..%d differ from what was acknowledged", a.id, a.first, a.last)
		}
	}
	return nil
}

// TestSnapshotWhileWriting reads the store read-only, again and again,
// while another process commits tool-using sessions to it: every read
// gets a snapshot in which every session loads, tool results are missing
// only at the end of a session, and every step acknowledged before the
// snapshot was taken is there.
func TestSnapshotWhileWriting(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := helperCmd(t, "crash", "STORE_DIR="+dir, "SEED=7")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	acked := map[string][]ack{}
	n := 0
	// take waits for at least min more acks, then takes all that are there.
	take := func(min int) {
		for got := 0; ; got++ {
			var line string
			var ok bool
			if got < min {
				select {
				case line, ok = <-lines:
				case <-time.After(30 * time.Second):
					t.Fatalf("no ack for 30s; helper stderr:\n%s", stderr.String())
				}
			} else {
				select {
				case line, ok = <-lines:
				default:
					return
				}
			}
			if !ok {
				t.Fatalf("the helper stopped:\n%s", stderr.String())
			}
			a, valid := parseAck(line)
			if !valid {
				t.Fatalf("helper wrote %q", line)
			}
			acked[a.id] = append(acked[a.id], a)
			n++
		}
	}
	ctx := context.Background()
	for i := range 8 {
		take(5)
		s, err := Open(dir, Options{ReadOnly: true, Logger: quietLogger()})
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if s.snapshot == "" && s.remote == nil {
			t.Fatalf("read %d: neither through the writer nor a snapshot, though a writer holds the store", i)
		}
		list, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range list {
			seen[m.ID] = true
			se, err := s.Load(ctx, m.ID)
			if err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			if _, err := checkToolResults(se.Messages); err != nil {
				t.Fatalf("read %d: session %s: %v", i, m.ID, err)
			}
			if err := checkAcks(se, acked[m.ID]); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
		for id := range acked {
			if !seen[id] {
				t.Fatalf("read %d: session %s was acknowledged before the snapshot but is not in it", i, id)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("8 snapshots while %d steps were committed", n)
}
