package badger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
)

// TestGroupCommit: steps of different sessions, and a batch of events,
// committed while a transaction is being committed share the next one
// (one sync for all of them), a step that does not fit its session fails alone, and every
// acknowledged step is stored, as a reopened store shows. The first
// leader is held before its commit until the other steps are queued, so
// the grouping does not depend on timing.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{})
	// Eight sessions on eight lock stripes: none waits for another's lock.
	var ids []string
	stripes := map[*sync.Mutex]bool{}
	for i := 0; len(ids) < 8; i++ {
		id := fmt.Sprintf("g%d", i)
		if mu := s.locks.of(id); !stripes[mu] {
			stripes[mu] = true
			ids = append(ids, id)
		}
	}
	commitN(t, s, "ev", 1, kernel.SessionMeta{Status: kernel.StatusIdle})
	held, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var batches []int
	beforeBatch = func(n int) {
		mu.Lock()
		batches = append(batches, n)
		first := len(batches) == 1
		mu.Unlock()
		if first {
			close(held)
			<-release
		}
	}
	t.Cleanup(func() { beforeBatch = nil })

	step := func(id string, seq uint64) kernel.Step {
		return kernel.Step{Messages: []kernel.Message{{Seq: seq, Role: kernel.RoleUser, Content: "hello " + id, Time: t0}},
			Meta: kernel.SessionMeta{Status: kernel.StatusIdle, Updated: t0}}
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	commit := func(i int, seq uint64) chan struct{} {
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			errs[i] = s.Commit(context.Background(), ids[i], step(ids[i], seq))
		}()
		return done
	}
	select {
	case <-held:
	case <-commit(0, 1):
		t.Fatalf("the first step was committed without a group leader (%v)", errs[0])
	}
	for i := 1; i < len(ids); i++ {
		seq := uint64(1)
		if i == len(ids)-1 {
			seq = 2 // a new session's first message is 1: a seq conflict
		}
		commit(i, seq)
	}
	var evFirst uint64
	var evErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		evFirst, evErr = s.AppendEvents(context.Background(), "ev", 0, []kernel.StoredEvent{
			{Type: "a", Time: t0, Data: []byte(`{}`)}, {Type: "b", Time: t0, Data: []byte(`{}`)}})
	}()
	for queued := 0; queued < len(ids); time.Sleep(time.Millisecond) {
		s.group.mu.Lock()
		queued = len(s.group.queue)
		s.group.mu.Unlock()
	}
	close(release)
	wg.Wait()

	if want := []int{1, len(ids)}; !slices.Equal(batches, want) {
		t.Fatalf("transactions of %v steps, want %v: the queued steps did not share one", batches, want)
	}
	for i, err := range errs {
		if i == len(ids)-1 {
			if !errors.Is(err, kernel.ErrSeqConflict) {
				t.Errorf("the step with the wrong seq: %v, want a seq conflict", err)
			}
		} else if err != nil {
			t.Errorf("commit %s: %v", ids[i], err)
		}
	}
	if evErr != nil || evFirst != 1 {
		t.Errorf("the events' append: first %d, %v", evFirst, evErr)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, Options{})
	for i, id := range ids {
		se, err := s.Load(context.Background(), id)
		if i == len(ids)-1 {
			if !errors.Is(err, kernel.ErrSessionNotFound) {
				t.Errorf("the refused step's session: %+v, %v; want it absent", se, err)
			}
			continue
		}
		if err != nil || len(se.Messages) != 1 || se.Messages[0].Content != "hello "+id || se.Meta.LastSeq != 1 {
			t.Errorf("session %s after reopening: %+v, %v", id, se, err)
		}
	}
	if evs, err := s.ReadEvents(context.Background(), "ev", 0, 10); err != nil || len(evs) != 2 || evs[1].Type != "b" {
		t.Errorf("the events after reopening: %+v, %v", evs, err)
	}
}
