package supervise

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestAttemptWait(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"success", nil, nil},
		{"failure is the waiter's answer", boom, boom},
		{"the starter gave up", context.Canceled, nil},
		{"the starter's deadline", context.DeadlineExceeded, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAttempt()
			done := make(chan error)
			go func() { done <- a.Wait(context.Background()) }()
			a.Finish(tc.err)
			if got := <-done; !errors.Is(got, tc.want) || (tc.want == nil && got != nil) {
				t.Errorf("Wait = %v, want %v", got, tc.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewAttempt().Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a done ctx: %v", err)
	}
}

// TestLaunch: a waiter that arrives during a start waits for it and gets
// its failure; a failure of a cancelled caller or a closing owner is not
// counted.
func TestLaunch(t *testing.T) {
	var mu sync.Mutex
	var slot *Attempt
	errStop := errors.New("closing")
	boom := errors.New("boom")
	got := make(chan struct{})
	waited := make(chan error)
	mu.Lock()
	_, counted, err := launch(context.Background(), &mu, &slot, errStop, 0, func(context.Context, time.Duration) (int, error) {
		// A second caller arrives while the start runs (mu is released).
		go func() {
			mu.Lock()
			a := slot
			mu.Unlock()
			close(got)
			waited <- a.Wait(context.Background())
		}()
		<-got
		return 0, boom
	})
	if !counted || err != boom || slot != nil {
		t.Fatalf("failed start: counted %v, err %v, slot %v", counted, err, slot)
	}
	mu.Unlock()
	if err := <-waited; err != boom {
		t.Fatalf("the waiter got %v, want the start's failure", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, counted, _ := launch(context.Background(), &mu, &slot, errStop, 0, func(context.Context, time.Duration) (int, error) { return 0, errStop }); counted {
		t.Error("a closing owner's failure was counted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, counted, _ := launch(ctx, &mu, &slot, errStop, 0, func(context.Context, time.Duration) (int, error) { return 0, boom }); counted {
		t.Error("a cancelled caller's failure was counted")
	}
	if v, counted, err := launch(context.Background(), &mu, &slot, errStop, 0, func(context.Context, time.Duration) (int, error) { return 7, nil }); v != 7 || counted || err != nil {
		t.Errorf("success: %v %v %v", v, counted, err)
	}
}
