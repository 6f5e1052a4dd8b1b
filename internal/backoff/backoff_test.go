package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestExponential(t *testing.T) {
	e := Exponential{Base: 200 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, 0}, {1, 200 * time.Millisecond}, {2, 400 * time.Millisecond},
		{3, 800 * time.Millisecond}, {4, time.Second}, {60, time.Second},
	} {
		if got := e.Delay(tc.n); got != tc.want {
			t.Errorf("Delay(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
	if got := (Exponential{}).Delay(5); got != 0 {
		t.Errorf("zero policy waits %s", got)
	}
	if got := (Exponential{Base: time.Hour, Max: time.Minute}).Delay(1); got != time.Minute {
		t.Errorf("a base above the cap: %s, want the cap", got)
	}
}

func TestFullJitter(t *testing.T) {
	if FullJitter(0) != 0 || FullJitter(-time.Second) != 0 {
		t.Error("no interval, no wait")
	}
	for range 1000 {
		if d := FullJitter(10 * time.Millisecond); d < 0 || d >= 10*time.Millisecond {
			t.Fatalf("%s is outside [0, 10ms)", d)
		}
	}
}

// TestRestarts walks a supervised process through crashes: backoff doubles
// and is capped, the third crash opens the breaker for the cooldown, a
// crash after the cooldown opens it again, a success resets everything.
func TestRestarts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := Restarts(3, 100*time.Millisecond, 10*time.Second)
	if b.Wait(t0) != 0 || b.IsOpen(t0) || b.Tripped() {
		t.Fatal("a fresh breaker waits or refuses")
	}
	if b.Failure(t0) {
		t.Fatal("one crash tripped it")
	}
	if got := b.Wait(t0.Add(30 * time.Millisecond)); got != 70*time.Millisecond {
		t.Errorf("wait after one crash, 30ms later: %s, want 70ms", got)
	}
	b.Failure(t0)
	if got := b.Wait(t0); got != 200*time.Millisecond {
		t.Errorf("wait after two crashes: %s, want 200ms", got)
	}
	if !b.Failure(t0) || !b.IsOpen(t0.Add(9*time.Second)) || b.Until() != t0.Add(10*time.Second) {
		t.Fatalf("three crashes: tripped %v, open until %s", b.Tripped(), b.Until())
	}
	t1 := t0.Add(10 * time.Second)
	if b.IsOpen(t1) {
		t.Fatal("still open after the cooldown")
	}
	if got := b.Wait(t1); got != 0 {
		t.Errorf("wait after the cooldown: %s, want 0 (the backoff is capped at the cooldown)", got)
	}
	if !b.Failure(t1) || b.Until() != t1.Add(10*time.Second) || b.Failures() != 4 {
		t.Fatalf("a crash after the cooldown: until %s, failures %d", b.Until(), b.Failures())
	}
	if !b.Success() || b.Tripped() || b.Failures() != 0 || b.Wait(t1) != 0 {
		t.Fatal("a success did not reset the breaker")
	}
	if b.Success() {
		t.Fatal("a second success reported closing an open breaker")
	}
}

func TestSleep(t *testing.T) {
	stop := make(chan struct{})
	errStop := errors.New("stopped")
	if err := Sleep(context.Background(), stop, errStop, 0); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := Sleep(context.Background(), stop, errStop, time.Hour); err != errStop {
		t.Fatalf("closed stop: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, nil, errStop, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: %v", err)
	}
}
