package policy_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/policy"
)

// TestDecisionLogFormats reads the decision log as this kernel writes it
// and as older kernels wrote it (eval_time in integer nanoseconds; the run
// and turn under the keys turn and round), and proves every form gives the
// same record.
func TestDecisionLogFormats(t *testing.T) {
	want := policy.LogRecord{
		Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Policy: "coding", Session: "s1", Run: 3, Turn: 2,
		CallID: "c1", Tool: "run_command",
		Decision: kernel.Decision{ID: "d1", Effect: kernel.EffectDeny, Rules: []string{"no-rm-rf"}, EvalTime: 8123 * time.Nanosecond},
	}
	const head = `{"time":"2026-11-22T10:00:00Z","policy":"coding","session_id":"s1",`
	const dec = `"call_id":"c1","tool":"run_command","decision":{"id":"d1","effect":"deny","rules":["no-rm-rf"],`
	for _, tc := range []struct{ name, line string }{
		{"current", head + `"run":3,"turn":2,` + dec + `"eval_time":"8.123µs"}}`},
		{"eval_time in nanoseconds", head + `"run":3,"turn":2,` + dec + `"eval_time":8123}}`},
		{"old keys turn and round", head + `"turn":3,"round":2,` + dec + `"eval_time":8123}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := policy.ReadDecisionLog("decisions.jsonl", strings.NewReader(tc.line+"\n\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			got, _ := json.Marshal(recs[0])
			exp, _ := json.Marshal(want)
			if !bytes.Equal(got, exp) {
				t.Fatalf("read\n%s\nwant\n%s", got, exp)
			}
		})
	}
}

// TestDecisionLogWritesDurationString: the log writes eval_time as a
// duration string, the form of events, and reads back what it wrote.
func TestDecisionLogWritesDurationString(t *testing.T) {
	rec := policy.LogRecord{Policy: "p", Run: 1, Turn: 1, CallID: "c", Tool: "t",
		Decision: kernel.Decision{ID: "d", Effect: kernel.EffectAllow, EvalTime: 1500 * time.Microsecond}}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`"eval_time":"1\.5ms"`).Match(b) {
		t.Fatalf("eval_time is not a duration string: %s", b)
	}
	recs, err := policy.ReadDecisionLog("log", bytes.NewReader(b))
	if err != nil || len(recs) != 1 || recs[0].Decision.EvalTime != rec.Decision.EvalTime || recs[0].Run != 1 || recs[0].Turn != 1 {
		t.Fatalf("read back %+v, %v", recs, err)
	}
}

// TestDecisionLogBadLines: a line that is not a decision, an eval_time
// that is not a duration, and a line mixing the old and new keys are
// refused with the file and line number.
func TestDecisionLogBadLines(t *testing.T) {
	ok := `{"policy":"p","run":1,"turn":1,"call_id":"c","tool":"t","decision":{"id":"d","effect":"allow","eval_time":"1ms"}}`
	for _, tc := range []struct{ name, line, want string }{
		{"not json", "nope", "log.jsonl:2: not a decision log line"},
		{"bad duration", strings.Replace(ok, `"1ms"`, `"soon"`, 1), `log.jsonl:2: not a decision log line: duration "soon"`},
		{"both run and round", strings.Replace(ok, `"turn":1`, `"round":1`, 1), "both run (the new key) and round (the old one)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.ReadDecisionLog("log.jsonl", strings.NewReader(ok+"\n"+tc.line+"\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzReadDecisionLog: any input is read or refused without a panic, and
// every record read survives a write and a second read unchanged (the
// current form is a fixed point of the old ones).
func FuzzReadDecisionLog(f *testing.F) {
	f.Add(`{"policy":"p","turn":3,"round":2,"call_id":"c","tool":"t","decision":{"id":"d","effect":"deny","eval_time":8123}}`)
	f.Add(`{"policy":"p","run":3,"turn":2,"call_id":"c","tool":"t","decision":{"id":"d","effect":"allow","eval_time":"1ms"}}`)
	f.Add("nope\n{}")
	f.Fuzz(func(t *testing.T, src string) {
		recs, err := policy.ReadDecisionLog("log", strings.NewReader(src))
		if err != nil {
			return
		}
		for _, r := range recs {
			b, err := json.Marshal(r)
			if err != nil {
				continue // a value JSON cannot write (a NaN argument, say)
			}
			again, err := policy.ReadDecisionLog("log", bytes.NewReader(b))
			if err != nil || len(again) != 1 {
				t.Fatalf("%s does not read back: %v", b, err)
			}
			b2, _ := json.Marshal(again[0])
			if !bytes.Equal(b, b2) {
				t.Fatalf("changed on a second read:\n%s\n%s", b, b2)
			}
		}
	})
}
