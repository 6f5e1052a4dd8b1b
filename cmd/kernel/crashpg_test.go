package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/postgres"
	"github.com/agentkernel/agentkernel/kernel/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// crashKills is how many faults the crash campaign injects: 3 in make
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

// crashFor is how long the crash campaign goes on injecting faults at
// most: $AGENTKERNEL_PG_CRASH_FOR (a duration; make crash-pg FOR=3m), or
// no bound but the count. The checks run after it, on everything done.
func crashFor(t *testing.T) time.Duration {
	v := os.Getenv("AGENTKERNEL_PG_CRASH_FOR")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("AGENTKERNEL_PG_CRASH_FOR=%q: want a positive duration (3m)", v)
	}
	return d
}

// campaignScript is a long script of runs: three tool rounds, then an
// answer, over and over, so every run of every session has steps to go
// through. Every side effect is a command that appends a line to the
// ledger ("step:token", the token fresh each time the command runs) and
// prints it: the ledger is what ran, whatever the histories say.
func campaignScript(runs int) string {
	var b strings.Builder
	b.WriteString("steps:\n")
	for i := range runs {
		fmt.Fprintf(&b, "  - text: \"round a %d\"\n    tool_calls:\n      - name: run_command\n        args: {argv: [sh, -c, \"t=$(date +%%s%%N); echo %da:$t >> ledger.txt; sleep 0.%d; echo ran %da:$t\"]}\n", i, i, 1+i%3, i)
		fmt.Fprintf(&b, "  - text: \"round b %d\"\n    tool_calls:\n      - name: read_file\n        args: {path: notes.txt}\n      - name: list_dir\n        args: {path: .}\n", i)
		fmt.Fprintf(&b, "  - text: \"round c %d\"\n    tool_calls:\n      - name: run_command\n        args: {argv: [sh, -c, \"t=$(date +%%s%%N); echo %dc:$t >> ledger.txt; echo ran %dc:$t\"]}\n", i, i, i)
		fmt.Fprintf(&b, "  - text: \"answer %d\"\n", i)
	}
	return b.String()
}

// campaign is the state the clients of the crash campaign share.
type campaign struct {
	c        *cluster
	ids      []string
	mu       sync.Mutex
	seen     []map[int][]byte // seen[i][seq]: a message as a client first saw it
	followUp [][]string       // follow-ups acknowledged queued, per session
	vmu      sync.Mutex
	bad      []string
	acked    atomic.Int64
	prompts  atomic.Int64
	idleSeen atomic.Int64 // idle sessions checked for an unanswered turn
}

func (cp *campaign) violate(format string, args ...any) {
	cp.vmu.Lock()
	cp.bad = append(cp.bad, fmt.Sprintf(format, args...))
	cp.vmu.Unlock()
}

// observe reads session i from p and checks it against what clients saw
// before: the tail clients saw is unchanged, the session at least as
// long; and a session idle in a consistent read (its message count and
// its messages agree) does not end with an unanswered turn.
func (cp *campaign) observe(i int, p *replicaProc) (status string, active bool, ok bool) {
	c := cp.c
	code, s, err := c.call(p, "GET", "/v1/sessions/"+cp.ids[i], nil)
	if err != nil || code != 200 {
		return "", false, false
	}
	status, _ = s["status"].(string)
	active = s["active_run"] != nil
	cp.mu.Lock()
	from := max(0, len(cp.seen[i])-20)
	cp.mu.Unlock()
	code, m, err := c.call(p, "GET", fmt.Sprintf("/v1/sessions/%s/messages?after=%d&limit=1000", cp.ids[i], from), nil)
	if err != nil || code != 200 {
		return "", false, false
	}
	msgs, _ := m["messages"].([]any)
	cp.mu.Lock()
	for j, raw := range msgs {
		seq := from + j + 1
		b, _ := json.Marshal(raw)
		if old, ok := cp.seen[i][seq]; ok {
			if !bytes.Equal(old, b) {
				cp.violate("session %s message %d changed:\n was %s\n now %s", cp.ids[i], seq, old, b)
			}
			continue
		}
		cp.seen[i][seq] = b
		cp.acked.Add(1)
	}
	seen := len(cp.seen[i])
	cp.mu.Unlock()
	last, _ := m["last_seq"].(float64)
	if int(last) < seen {
		cp.violate("session %s: last seq %d, but clients saw %d messages: acknowledged steps lost", cp.ids[i], int(last), seen)
	}
	totals, _ := s["totals"].(map[string]any)
	if n, _ := totals["messages"].(float64); status == "idle" && !active && len(msgs) > 0 && int(n) == int(last) {
		cp.idleSeen.Add(1)
		if role := msgs[len(msgs)-1].(map[string]any)["role"]; role == "tool" || role == "user" {
			cp.violate("session %s is idle with an unanswered turn (its last message, %d, is a %s message)", cp.ids[i], int(last), role)
		}
	}
	return status, active, true
}

// TestReplicaCrashCampaign runs three kernel serve replicas on a
// PostgreSQL server of its own while clients drive sessions through all
// of them (prompts, follow-ups queued behind runs in flight, resumes),
// and injects faults at random: a replica killed (SIGKILL, then
// restarted under a new name), a replica paused (SIGSTOP) past its lease
// and continued, the database killed and restarted. It checks the
// invariants of docs/serve.md: no acknowledged message lost, changed or
// stored twice; every call answered once; and the three of issue 37:
//
//  1. the history never says a call did not run when it ran: every
//     command appends to a ledger, and no command ran that its history
//     says did not, or ran twice (per step, the ledger holds no more
//     runs than the histories' calls that ran or may have run; every
//     result that shows a command's output is in the ledger once);
//  2. no session is ever idle with an unanswered turn, and every
//     interrupted one is resumed;
//  3. every follow-up acknowledged as queued runs exactly once.
func TestReplicaCrashCampaign(t *testing.T) {
	t.Parallel() // main_test.go, "Parallel tests"
	faults, budget := crashKills(t), crashFor(t)
	srv, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	c := newClusterOn(t, srv, campaignScript(40*faults+200), "", time.Second)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d, %d faults", seed, faults)

	var mu sync.Mutex
	reps := []*replicaProc{c.start("a0"), c.start("b0"), c.start("c0")}
	all := slices.Clone(reps) // every replica started, for a failure's report
	live := func() *replicaProc {
		mu.Lock()
		defer mu.Unlock()
		return reps[rand.IntN(len(reps))]
	}
	const sessions = 4
	cp := &campaign{c: c, ids: make([]string, sessions), seen: make([]map[int][]byte, sessions), followUp: make([][]string, sessions)}
	for i := range cp.ids {
		cp.ids[i] = c.must(reps[0], 201, "POST", "/v1/sessions", map[string]any{"title": fmt.Sprint("campaign ", i)})["id"].(string)
		cp.seen[i] = map[int][]byte{}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for {
				select {
				case <-stop:
					return
				case <-time.After(30 * time.Millisecond):
				}
				p := live()
				status, active, ok := cp.observe(i, p)
				switch {
				case !ok:
				case active && rand.IntN(30) == 0:
					// A follow-up queued behind the run in flight.
					n++
					text := fmt.Sprintf("follow-up %d of session %d", n, i)
					code, r, err := c.call(p, "POST", "/v1/sessions/"+cp.ids[i]+"/runs", map[string]any{"prompt": text, "if_busy": "queue"})
					if err == nil && code == 202 && r["queued"] != nil {
						cp.mu.Lock()
						cp.followUp[i] = append(cp.followUp[i], text)
						cp.mu.Unlock()
					}
				case active:
				case status == "idle" || status == "failed":
					if code, _, err := c.call(p, "POST", "/v1/sessions/"+cp.ids[i]+"/runs", map[string]any{"prompt": "go on"}); err == nil && code == 202 {
						cp.prompts.Add(1)
					}
				case status == "interrupted":
					c.call(p, "POST", "/v1/sessions/"+cp.ids[i]+"/resume", nil)
				}
			}
		}()
	}
	var kills, pauses, dbRestarts int
	gen := 0
	began := time.Now()
	for k := range faults {
		if budget > 0 && time.Since(began) > budget {
			t.Logf("stopped after %d faults: AGENTKERNEL_PG_CRASH_FOR=%s is up", k, budget)
			faults = k
			break
		}
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		mu.Lock()
		victim := rng.IntN(len(reps))
		p := reps[victim]
		mu.Unlock()
		// The first three are one of each kind, so that even the short
		// campaign of make test has them all; then at random.
		r := []int{10, 5, 0}[min(k, 2)]
		if k >= 3 {
			r = rng.IntN(20)
		}
		kind := "kill of " + p.name
		switch {
		case r < 2:
			kind = "database restart"
		case r < 6:
			kind = "pause of " + p.name
		}
		t.Logf("%s fault %d: %s", time.Now().UTC().Format("15:04:05.000"), k+1, kind)
		switch {
		case r < 2: // the database dies and comes back
			srv.Kill()
			time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			dbRestarts++
		case r < 6: // a replica stalls past its lease, then goes on
			p.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(c.ttl + time.Duration(200+rng.IntN(1500))*time.Millisecond)
			p.cmd.Process.Signal(syscall.SIGCONT)
			pauses++
		default:
			p.kill()
			gen++
			next := c.start(fmt.Sprintf("%c%d", "abc"[victim], gen))
			mu.Lock()
			reps[victim] = next
			all = append(all, next)
			mu.Unlock()
			kills++
		}
		if k%10 == 9 {
			t.Logf("%d faults (%d kills, %d pauses, %d database restarts), %d acknowledged messages seen, %d prompts", k+1, kills, pauses, dbRestarts, cp.acked.Load(), cp.prompts.Load())
		}
	}
	close(stop)
	wg.Wait()
	cp.settle(t, live)
	cp.check(t, live())
	t.Logf("%d faults on 3 replicas (%d kills, %d pauses past the lease, %d database restarts), %d sessions, %d prompts, %d follow-ups queued, %d acknowledged messages seen, %d idle sessions checked for an unanswered turn; %d violations",
		faults, kills, pauses, dbRestarts, sessions, cp.prompts.Load(), cp.followUps(), cp.acked.Load(), cp.idleSeen.Load(), len(cp.bad))
	for _, v := range cp.bad {
		t.Error(v)
	}
	if len(cp.bad) > 0 {
		for _, p := range all {
			t.Logf("replica %s's log:\n%s", p.name, p.stderr.String())
		}
	}
}

func (cp *campaign) followUps() int {
	n := 0
	for _, f := range cp.followUp {
		n += len(f)
	}
	return n
}

// settle waits until every session is at rest: no run in flight, not
// running or interrupted, and no follow-up queued or taken.
func (cp *campaign) settle(t *testing.T, live func() *replicaProc) {
	ctx := context.Background()
	st, err := postgres.Open(ctx, cp.c.dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(180 * time.Second)
	for i := range cp.ids {
		for {
			p := live()
			status, active, ok := cp.observe(i, p)
			waiting, werr := st.Queue("campaign").Waiting(ctx)
			if ok && werr == nil && !active && status != "running" && status != "interrupted" && !slices.Contains(waiting, cp.ids[i]) {
				break
			}
			if status == "interrupted" { // resumed by the replicas' --auto-resume, or by a client
				cp.c.call(p, "POST", "/v1/sessions/"+cp.ids[i]+"/resume", nil)
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s never settled (status %s, follow-ups waiting: %v)", cp.ids[i], status, waiting)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

var ledgerLine = regexp.MustCompile(`^(\d+[ac]):(\d+)$`)
var ranLine = regexp.MustCompile(`ran (\d+[ac]):(\d+)`)
var stepOf = regexp.MustCompile(`echo (\d+[ac]):\$t >> ledger`)

// check holds the settled sessions to the invariants.
func (cp *campaign) check(t *testing.T, p *replicaProc) {
	c := cp.c
	ledger := map[string]int{}   // step -> commands that ran
	ranToken := map[string]int{} // "step:token" -> times in the ledger
	raw, err := os.ReadFile(c.ws("ledger.txt"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if m := ledgerLine.FindStringSubmatch(l); m != nil {
			ledger[m[1]]++
			ranToken[l]++
		} else if l != "" {
			cp.violate("ledger line %q: not step:token", l)
		}
	}
	ran, mayHave, notRun := map[string]int{}, map[string]int{}, map[string]int{}
	// What each session's history says of each step, for a violation's
	// report: "session: result" lines.
	said := map[string][]string{}
	shown := map[string]bool{} // ledger lines a result shows
	// Each session's steps as its history has them ("12a:ran 12c:may"),
	// and its length, for the same report.
	trail := make([]string, len(cp.ids))
	var interrupted, launcherKilled int
	for i, sid := range cp.ids {
		msgs := c.messages(p, sid)
		if len(msgs) < len(cp.seen[i]) {
			cp.violate("session %s: %d messages at the end, clients saw %d", sid, len(msgs), len(cp.seen[i]))
		}
		args := map[string]string{}
		for j, m := range msgs {
			b, _ := json.Marshal(m)
			if old, ok := cp.seen[i][j+1]; ok && !bytes.Equal(old, b) {
				cp.violate("session %s message %d changed at the end", sid, j+1)
			}
			calls, _ := m["tool_calls"].([]any)
			for _, call := range calls {
				cm := call.(map[string]any)
				args[cm["id"].(string)] = fmt.Sprint(cm["arguments"])
			}
			if m["role"] != "tool" || m["tool_name"] != "run_command" {
				continue
			}
			step := stepOf.FindStringSubmatch(args[fmt.Sprint(m["tool_call_id"])])
			if step == nil {
				cp.violate("session %s message %d answers a command the script never made", sid, j+1)
				continue
			}
			content := fmt.Sprint(m["content"])
			said[step[1]] = append(said[step[1]], fmt.Sprintf("session %s message %d (call %v): %.120q", sid, j+1, m["tool_call_id"], content))
			kind := "may"
			switch r := ranLine.FindStringSubmatch(content); {
			case strings.HasPrefix(content, kernel.InterruptedNotRun):
				kind = "not"
				notRun[step[1]]++
				interrupted++
			case r != nil:
				kind = "ran"
				if ranToken[r[1]+":"+r[2]] != 1 {
					cp.violate("session %s: the command whose output is %q is in the ledger %d times, want once", sid, r[0], ranToken[r[1]+":"+r[2]])
				}
				ran[step[1]]++
				shown[r[1]+":"+r[2]] = true
			default: // interrupted, may have run; an error; cancelled
				mayHave[step[1]]++
				if strings.Contains(content, "launcher was killed") {
					// Issue 37 saw four of these, unexplained, after
					// replica restarts: counted, to be looked at.
					launcherKilled++
				}
				if strings.HasPrefix(content, "interrupted") {
					interrupted++
				}
			}
			trail[i] += fmt.Sprintf(" %s:%s@%d", step[1], kind, j+1)
		}
		trail[i] = fmt.Sprintf("session %s, %d messages:%s", sid, len(msgs), trail[i])
		if bad := pairProblem(msgs); bad != "" {
			cp.violate("session %s: %s", sid, bad)
		}
		for _, f := range cp.followUp[i] {
			if n := prompts(msgs, f); n != 1 {
				cp.violate("session %s: the follow-up %q, acknowledged as queued, is in the session %d times, want once", sid, f, n)
			}
		}
	}
	traced := false
	for step, n := range ledger {
		if n > ran[step]+mayHave[step] {
			// The evidence: the runs no result shows, and what the
			// histories say of the step.
			var unshown []string
			for l := range ranToken {
				if strings.HasPrefix(l, step+":") && !shown[l] {
					unshown = append(unshown, l)
				}
			}
			slices.Sort(unshown)
			cp.violate("step %s's command ran %d times, but the histories hold %d runs and %d calls that may have run (%d say it did not run): a command ran that its history says did not, or ran twice\n runs no result shows: %v\n the histories:\n  %s",
				step, n, ran[step], mayHave[step], notRun[step], unshown, strings.Join(said[step], "\n  "))
			traced = true
		}
	}
	if traced {
		t.Logf("the sessions' steps (step:result@seq):\n%s\nthe ledger:\n%s", strings.Join(trail, "\n"), raw)
		cp.dumpDatabase(t, p)
	}
	t.Logf("ledger: %d commands ran; the histories: %d with their output, %d may have run, %d did not run; %d calls answered as interrupted; %d results say the sandbox launcher was killed",
		len(ranToken), sum(ran), sum(mayHave), sum(notRun), interrupted, launcherKilled)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
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

// dumpDatabase logs, for a violation's report, what the database holds
// two seconds after the check (read directly, not through a replica) and
// what a replica says then: each session's lease and last seq, and the
// runs on the board.
func (cp *campaign) dumpDatabase(t *testing.T, p *replicaProc) {
	time.Sleep(2 * time.Second)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cp.c.dsn)
	if err != nil {
		t.Logf("dump: %v", err)
		return
	}
	defer conn.Close(ctx)
	var b strings.Builder
	rows, err := conn.Query(ctx, `SELECT id, last_seq, status, coalesce(lease_owner, ''), lease_token, coalesce(lease_expires > now(), false),
  (SELECT count(*) FROM ak_messages m WHERE m.session_id = s.id), (SELECT coalesce(max(last_seq), 0) FROM ak_segments g WHERE g.session_id = s.id)
FROM ak_sessions s ORDER BY id`)
	if err == nil {
		for rows.Next() {
			var id, status, owner string
			var last, token, msgs, seg int64
			var live bool
			rows.Scan(&id, &last, &status, &owner, &token, &live, &msgs, &seg)
			fmt.Fprintf(&b, "session %s: last_seq %d (message rows %d, segments to %d), status %s, lease %s token %d live %v; a replica now shows %d messages\n", id, last, msgs, seg, status, owner, token, live, len(cp.c.messages(p, id)))
		}
		rows.Close()
	}
	rows, err = conn.Query(ctx, `SELECT id, session_id, replica, status, created FROM ak_runs ORDER BY created DESC LIMIT 16`)
	if err == nil {
		for rows.Next() {
			var id, sid, rep, status string
			var created time.Time
			rows.Scan(&id, &sid, &rep, &status, &created)
			fmt.Fprintf(&b, "run %s of %s on %s: %s, created %s\n", id, sid, rep, status, created.UTC().Format("15:04:05.000"))
		}
		rows.Close()
	}
	t.Logf("the database, two seconds after the check:\n%s", b.String())
}
