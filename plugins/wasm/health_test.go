package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBreaker: the breaker's states on a fake clock: three failures open
// it, calls fail fast until the backoff has passed, one call probes, a
// failed probe doubles the backoff (capped), a good one closes it.
func TestBreaker(t *testing.T) {
	now := time.Unix(0, 0)
	b := &breaker{now: func() time.Time { return now }}
	boom := errors.New("boom")
	for i := range breakerThreshold {
		if probe, err := b.admit(); probe || err != nil {
			t.Fatalf("closed breaker: admit %v, %v", probe, err)
		}
		if open := b.failure(boom); open != (i == breakerThreshold-1) {
			t.Fatalf("after %d failures open=%v", i+1, open)
		}
	}
	if _, err := b.admit(); !errors.Is(err, ErrUnhealthy) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("open breaker admitted: %v", err)
	}
	now = now.Add(breakerMinBackoff)
	if probe, err := b.admit(); !probe || err != nil {
		t.Fatalf("after the backoff: %v, %v; want a probe", probe, err)
	}
	if _, err := b.admit(); !errors.Is(err, ErrUnhealthy) {
		t.Fatalf("a second call during the probe was admitted: %v", err)
	}
	b.failure(boom)
	if b.state().OpenFor() != 2*breakerMinBackoff {
		t.Fatalf("backoff %s after a failed probe, want %s", b.state().OpenFor(), 2*breakerMinBackoff)
	}
	for range 20 {
		now = now.Add(b.state().OpenFor())
		b.admit()
		b.failure(boom)
	}
	if b.state().OpenFor() != breakerMaxBackoff {
		t.Fatalf("backoff %s, want the cap %s", b.state().OpenFor(), breakerMaxBackoff)
	}
	now = now.Add(b.state().OpenFor())
	if probe, _ := b.admit(); !probe {
		t.Fatal("no probe")
	}
	if !b.success() {
		t.Fatal("a good probe did not report closing the breaker")
	}
	if probe, err := b.admit(); probe || err != nil {
		t.Fatalf("closed again: %v, %v", probe, err)
	}
}

// TestPoolBreaker: a pooled reactor whose _initialize fails, or never
// ends, trips the breaker after breakerThreshold attempts: the tool says
// unhealthy, calls fail fast with the reason, and the pool stops trying
// (no instantiation, so no CPU, while idle).
func TestPoolBreaker(t *testing.T) {
	// The failing one gets minutes: under -race on a loaded machine its Go
	// runtime must reach the exit, not a deadline.
	for _, tc := range []struct {
		mode, reason string
		timeout      time.Duration
	}{
		{"fail-init", "module exited with code 3", 3 * time.Minute},
		{"hang-init", "initialising module reactor took longer than 300ms", 300 * time.Millisecond},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h := newTestHost(t)
			tools, _, err := h.Load(context.Background(), ModuleConfig{Path: reactorWasm, Pool: 2, Warm: true,
				Grants: Grants{Env: map[string]string{"AK_VISIBLE": tc.mode}, Timeout: Duration(tc.timeout)}})
			if err != nil {
				t.Fatal(err)
			}
			echo := tools[0]
			m := echo.(*tool).m
			deadline := time.Now().Add(10 * time.Minute)
			for open, _ := m.health.isOpen(); !open; open, _ = m.health.isOpen() {
				if time.Now().After(deadline) {
					t.Fatal("the breaker did not open")
				}
				time.Sleep(5 * time.Millisecond)
			}
			health, _ := Health(echo)
			if !strings.HasPrefix(health, "unhealthy: ") || !strings.Contains(health, tc.reason) {
				t.Errorf("health %q, want unhealthy naming %q", health, tc.reason)
			}
			start := time.Now()
			res, err := echo.Call(context.Background(), json.RawMessage(`{"text":"x"}`))
			if te := toolError(t, err); te.Code != "unavailable" || !errors.Is(err, ErrUnhealthy) || !res.IsError || !strings.Contains(res.Content, tc.reason) {
				t.Fatalf("%+v, %v; want unavailable naming %q", res, err, tc.reason)
			}
			t.Logf("failed fast in %s", time.Since(start))
			m.health.mu.Lock()
			fails := m.health.state().Failures()
			m.health.mu.Unlock()
			time.Sleep(500 * time.Millisecond) // idle: nothing may retry
			m.health.mu.Lock()
			defer m.health.mu.Unlock()
			if m.health.state().Failures() != fails {
				t.Fatalf("%d initialisations while idle with the breaker open, want none", m.health.state().Failures()-fails)
			}
		})
	}
}
