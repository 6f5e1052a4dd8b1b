package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// crashKills is how many replicas the crash campaign kills: 3 in make
// test, $AGENTKERNEL_PG_CRASH_KILLS in make crash-pg.
func crashKills(t *testing.T) int {
	if v := os.Getenv("AGENTKERNEL_PG_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AGENTKERNEL_PG_CRASH_KILLS=%q: want a positive number", v)
		}
		return n
	}
	return 3
}

// campaignScript is a long script of runs: three tool rounds (a command
// that takes a while, reads, a listing), then an answer, over and over,
// so every run of every session has steps to go through.
func campaignScript(runs int) string {
	var b strings.Builder
	b.WriteString("steps:\n")
	for i := range runs {
		fmt.Fprintf(&b, "  - text: \"round a %d\"\n    tool_calls:\n      - name: run_command\n        args: {argv: [sh, -c, \"sleep 0.%d; echo slept\"]}\n", i, 1+i%3)
		fmt.Fprintf(&b, "  - text: \"round b %d\"\n    tool_calls:\n      - name: read_file\n        args: {path: notes.txt}\n      - name: list_dir\n        args: {path: .}\n", i)
		fmt.Fprintf(&b, "  - text: \"round c %d\"\n    tool_calls:\n      - name: run_command\n        args: {argv: [sh, -c, \"echo %d >> log.txt\"]}\n", i, i)
		fmt.Fprintf(&b, "  - text: \"answer %d\"\n", i)
	}
	return b.String()
}

// TestReplicaCrashCampaign kills kernel serve replicas with SIGKILL at
// random points while clients run tool-using sessions through both, and
// restarts each killed one under a new name. Clients read the sessions'
// messages all along: every message a client ever saw is an acknowledged
// step. The invariants are the Badger crash test's: no acknowledged
// message is lost or changed, none is stored twice, and every tool call
// has exactly one result, except the calls of the last message of a run
// that stops for good. After the kills the surviving replicas resume
// every interrupted session (failover) to the end.
func TestReplicaCrashCampaign(t *testing.T) {
	kills := crashKills(t)
	c := newCluster(t, campaignScript(40*kills+200), "", time.Second)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d, %d kills", seed, kills)

	var mu sync.Mutex
	gen := 0
	reps := []*replicaProc{c.start("a0"), c.start("b0")}
	live := func() *replicaProc {
		mu.Lock()
		defer mu.Unlock()
		return reps[rand.IntN(len(reps))]
	}
	const sessions = 4
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = c.must(reps[0], 201, "POST", "/v1/sessions", map[string]any{"title": fmt.Sprint("campaign ", i)})["id"].(string)
	}
	// seen[sid][seq] is the message as a client first saw it.
	seen := make([]map[int][]byte, sessions)
	for i := range seen {
		seen[i] = map[int][]byte{}
	}
	var violations []string
	var vmu sync.Mutex
	violate := func(format string, args ...any) {
		vmu.Lock()
		violations = append(violations, fmt.Sprintf(format, args...))
		vmu.Unlock()
	}
	var acked, prompts atomic.Int64
	// observe reads a session from a replica and checks it against what
	// clients saw before.
	observe := func(i int, p *replicaProc) (status string, active bool, ok bool) {
		code, s, err := c.call(p, "GET", "/v1/sessions/"+ids[i], nil)
		if err != nil || code != 200 {
			return "", false, false
		}
		status, _ = s["status"].(string)
		active = s["active_run"] != nil
		// The messages from a little before the last one seen: the tail
		// clients saw must be unchanged, and the session at least as long.
		from := max(0, len(seen[i])-20)
		code, m, err := c.call(p, "GET", fmt.Sprintf("/v1/sessions/%s/messages?after=%d&limit=1000", ids[i], from), nil)
		if err != nil || code != 200 {
			return "", false, false
		}
		msgs, _ := m["messages"].([]any)
		for j, raw := range msgs {
			seq := from + j + 1
			b, _ := json.Marshal(raw)
			if old, ok := seen[i][seq]; ok {
				if !bytes.Equal(old, b) {
					violate("session %s message %d changed:\n was %s\n now %s", ids[i], seq, old, b)
				}
				continue
			}
			seen[i][seq] = b
			acked.Add(1)
		}
		if last, _ := m["last_seq"].(float64); int(last) < len(seen[i]) {
			violate("session %s: last seq %d, but clients saw %d messages: acknowledged steps lost", ids[i], int(last), len(seen[i]))
		}
		return status, active, true
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(30 * time.Millisecond):
				}
				p := live()
				status, active, ok := observe(i, p)
				if !ok || active {
					continue
				}
				switch status {
				case "idle", "failed":
					if code, _, err := c.call(p, "POST", "/v1/sessions/"+ids[i]+"/runs", map[string]any{"prompt": "go on"}); err == nil && code == 202 {
						prompts.Add(1)
					}
				case "interrupted":
					c.call(p, "POST", "/v1/sessions/"+ids[i]+"/resume", nil)
				}
			}
		}()
	}
	for k := range kills {
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		mu.Lock()
		victim := rng.IntN(len(reps))
		p := reps[victim]
		mu.Unlock()
		p.kill()
		gen++
		next := c.start(fmt.Sprintf("%c%d", "ab"[victim], gen))
		mu.Lock()
		reps[victim] = next
		mu.Unlock()
		if k%10 == 9 {
			t.Logf("%d kills, %d acknowledged messages seen, %d prompts", k+1, acked.Load(), prompts.Load())
		}
	}
	close(stop)
	wg.Wait()
	// Settle: the replicas finish (or fail over) every run.
	var interrupted, resumes int
	for i := range sessions {
		p := live()
		deadline := time.Now().Add(120 * time.Second)
		for {
			status, active, ok := observe(i, p)
			if ok && !active && status != "running" && status != "interrupted" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s never settled (status %s)", ids[i], status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		msgs := c.messages(p, ids[i])
		if len(msgs) < len(seen[i]) {
			violate("session %s: %d messages at the end, clients saw %d", ids[i], len(msgs), len(seen[i]))
		}
		for j, m := range msgs {
			b, _ := json.Marshal(m)
			if old, ok := seen[i][j+1]; ok && !bytes.Equal(old, b) {
				violate("session %s message %d changed at the end", ids[i], j+1)
			}
			if m["role"] == "tool" && strings.HasPrefix(fmt.Sprint(m["content"]), "interrupted") {
				interrupted++
			}
		}
		if bad := pairProblem(msgs); bad != "" {
			violate("session %s: %s", ids[i], bad)
		}
		for _, r := range c.must(p, 200, "GET", "/v1/sessions/"+ids[i]+"/runs", nil)["runs"].([]any) {
			if r.(map[string]any)["kind"] == "resume" {
				resumes++
			}
		}
	}
	t.Logf("%d kills of 2 replicas, %d sessions, %d prompts, %d acknowledged messages seen, %d calls answered as interrupted, %d resumed runs among the last listed; %d violations",
		kills, sessions, prompts.Load(), acked.Load(), interrupted, resumes, len(violations))
	for _, v := range violations {
		t.Error(v)
	}
}

// pairProblem is checkPairs returning what is wrong instead of failing.
func pairProblem(msgs []map[string]any) string {
	open := map[string]bool{}
	for i, m := range msgs {
		if seq := int(m["seq"].(float64)); seq != i+1 {
			return fmt.Sprintf("message %d has seq %d: a gap or a repeat", i+1, seq)
		}
		if m["role"] == "tool" {
			id, _ := m["tool_call_id"].(string)
			if !open[id] {
				return fmt.Sprintf("message %d answers call %q, which awaits no result (a duplicate?)", i+1, id)
			}
			delete(open, id)
			continue
		}
		if len(open) > 0 {
			return fmt.Sprintf("message %d follows %d calls without a result", i+1, len(open))
		}
		calls, _ := m["tool_calls"].([]any)
		for _, c := range calls {
			open[c.(map[string]any)["id"].(string)] = true
		}
	}
	return ""
}
