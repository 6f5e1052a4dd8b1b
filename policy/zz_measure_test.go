package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func genIssue(n int) string {
	var b, t strings.Builder
	b.WriteString("name: gen\nrevision: \"1\"\ndefaults: {tool_call: allow}\nrules:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: cmd%d\n    effect: deny\n    when: call.command matches \"^tool%d( |$)\"\n", i, i)
		fmt.Fprintf(&t, "  - name: cmd%d\n    input: {call: {tool: run_command, args: {argv: [tool%d, x]}}}\n    expect: {decision: deny, rules: [cmd%d]}\n", i, i, i)
	}
	b.WriteString("tests:\n")
	b.WriteString(t.String())
	return b.String()
}

func TestZZMeasure(t *testing.T) {
	src := []byte(genIssue(10000))
	ctx := context.Background()
	for range 3 {
		t0 := time.Now()
		ps := &problems{file: "x", lines: splitLines(src), ctx: ctx}
		doc := parseFile(ps, src)
		t1 := time.Now()
		p := build(ps, doc, src, Options{})
		t2 := time.Now()
		p.rindex = newRuleIndex(p.rules)
		t3 := time.Now()
		rep, _ := p.RunTests(ctx)
		t4 := time.Now()
		t.Logf("parse %v build %v index %v tests %v (evaluated %d, passed %v)", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), rep.Evaluated, rep.Passed())
	}
}
