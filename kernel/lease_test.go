package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
	"github.com/agentkernel/agentkernel/kernel/store/memory"
)

// leaseStore is a memory store with leases (kernel.Leaser) kept in the
// process: enough to test the kernel's side of the contract (the token on
// every step, the end of a run whose lease is lost). The postgres store is
// held to the whole contract by kerneltest.TestLeaser.
type leaseStore struct {
	*memory.Store
	mu      sync.Mutex
	holder  string
	token   uint64
	expires time.Time
	fences  []uint64 // the Fence of every step committed
	renewFn func() error
}

func (s *leaseStore) AcquireLease(_ context.Context, id, holder string, ttl time.Duration) (kernel.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder != "" && time.Now().Before(s.expires) {
		return kernel.Lease{}, &kernel.LeaseHeldError{SessionID: id, Holder: s.holder, Expires: s.expires}
	}
	s.token++
	s.holder, s.expires = holder, time.Now().Add(ttl)
	return kernel.Lease{SessionID: id, Holder: holder, Token: s.token, Expires: s.expires}, nil
}

func (s *leaseStore) RenewLease(_ context.Context, l kernel.Lease, ttl time.Duration) (kernel.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.renewFn != nil {
		if err := s.renewFn(); err != nil {
			return l, err
		}
	}
	if s.holder != l.Holder || s.token != l.Token || !time.Now().Before(s.expires) {
		return l, kernel.ErrLeaseLost
	}
	s.expires = time.Now().Add(ttl)
	l.Expires = s.expires
	return l, nil
}

func (s *leaseStore) ReleaseLease(_ context.Context, l kernel.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder == l.Holder && s.token == l.Token {
		s.holder = ""
	}
	return nil
}

// steal gives the lease to another holder behind the holder's back.
func (s *leaseStore) steal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token++
	s.holder, s.expires = "thief", time.Now().Add(time.Hour)
}

func (s *leaseStore) Commit(ctx context.Context, id string, step kernel.Step) error {
	s.mu.Lock()
	if step.Fence != 0 && (step.Fence != s.token || s.holder == "" || !time.Now().Before(s.expires)) {
		s.mu.Unlock()
		return kernel.ErrLeaseLost
	}
	s.fences = append(s.fences, step.Fence)
	s.mu.Unlock()
	return s.Store.Commit(ctx, id, step)
}

// TestRunCarriesTheLeaseToken: every step of a run holding a lease carries
// its token.
func TestRunCarriesTheLeaseToken(t *testing.T) {
	st := &leaseStore{Store: memory.New()}
	ctx := context.Background()
	if err := st.Store.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}); err != nil {
		t.Fatal(err)
	}
	reg := kernel.NewRegistry()
	if err := reg.Register(kerneltest.EchoTool("echo")); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Store: st, Tools: reg, Provider: kerneltest.NewProvider(
		kerneltest.Calls("echo", map[string]string{"text": "x"}), kerneltest.Text("done"))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := kernel.HoldLease(ctx, st, "s", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	if _, err := k.With(kernel.RunOptions{Lease: h}).Run(ctx, "s", "go"); err != nil {
		t.Fatal(err)
	}
	if len(st.fences) < 4 {
		t.Fatalf("%d steps committed, want at least 4", len(st.fences))
	}
	for i, f := range st.fences {
		if f != h.Token() {
			t.Fatalf("step %d carried fence %d, want the lease's token %d", i, f, h.Token())
		}
	}
}

// TestRunStopsWhenLeaseLost: a run whose lease is taken over while a tool
// runs writes nothing more: its round is refused by the store, and the run
// ends with ErrLeaseLost.
func TestRunStopsWhenLeaseLost(t *testing.T) {
	st := &leaseStore{Store: memory.New()}
	ctx := context.Background()
	if err := st.Store.Commit(ctx, "s", kernel.Step{Meta: kernel.SessionMeta{Status: kernel.StatusIdle}}); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	slow := kernel.NewTool(kernel.ToolSpec{Name: "slow", Description: "waits", Tier: kernel.TierSideEffecting, Source: "test", Schema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ json.RawMessage) (kernel.Result, error) {
			<-gate
			return kernel.Result{Content: "ran"}, nil
		})
	reg := kernel.NewRegistry()
	if err := reg.Register(slow); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Store: st, Tools: reg, Provider: kerneltest.NewProvider(
		kerneltest.Calls("slow", map[string]string{}), kerneltest.Text("done"))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := kernel.HoldLease(ctx, st, "s", "me", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	var events []kernel.Event
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		_, err := k.With(kernel.RunOptions{Lease: h, OnEvent: func(e kernel.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }}).Run(ctx, "s", "go")
		done <- err
	}()
	for {
		se, _ := st.Load(ctx, "s")
		if len(se.Messages) == 2 { // the prompt and the call: the tool runs
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	st.steal()
	<-h.Lost() // the holder notices at its next renewal
	close(gate)
	if err := <-done; !errors.Is(err, kernel.ErrLeaseLost) {
		t.Fatalf("the run ended with %v, want ErrLeaseLost", err)
	}
	se, _ := st.Load(ctx, "s")
	if len(se.Messages) != 2 {
		t.Fatalf("the session has %d messages after the lease was lost, want the 2 written before", len(se.Messages))
	}
}

// TestHeldLeaseOutlivesTransientFailures: renewals that fail for a reason
// other than a lost lease (the database away) are retried, and the lease
// is kept while a renewal succeeds within its ttl; once none has for a
// whole ttl, it counts as lost.
func TestHeldLeaseOutlivesTransientFailures(t *testing.T) {
	st := &leaseStore{Store: memory.New()}
	ctx := context.Background()
	var mu sync.Mutex
	failing := 0
	st.renewFn = func() error {
		mu.Lock()
		defer mu.Unlock()
		if failing > 0 {
			failing--
			return fmt.Errorf("connection refused")
		}
		return nil
	}
	h, err := kernel.HoldLease(ctx, st, "s", "me", 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	mu.Lock()
	failing = 1 // one failed renewal: retried sooner, then renewed
	mu.Unlock()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if h.Err() != nil {
			t.Fatalf("one failed renewal lost the lease: %v", h.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	failing = 1 << 30 // the database is gone for good
	mu.Unlock()
	select {
	case <-h.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("renewals failing for longer than the ttl did not lose the lease")
	}
	if !errors.Is(h.Err(), kernel.ErrLeaseLost) {
		t.Fatalf("Err = %v", h.Err())
	}
}
