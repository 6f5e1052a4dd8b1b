package hooks

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
	"github.com/agentkernel/agentkernel/kernel"
)

// noop is the innermost handler: a tool that does nothing.
var noop = kernel.HandlerFunc(func(context.Context, *kernel.Call) (kernel.Result, error) {
	return kernel.Result{Content: "ok"}, nil
})

func compose(hs []kernel.Hook, next kernel.Handler) kernel.Handler {
	for i := len(hs) - 1; i >= 0; i-- {
		next = hs[i](next)
	}
	return next
}

// BenchmarkChain measures the time hooks add around a no-op tool; compare
// each case with "bare".
func BenchmarkChain(b *testing.B) {
	m, err := NewMatcher(`tool == "echo" && "fs" in tags`)
	if err != nil {
		b.Fatal(err)
	}
	allow := func(context.Context, *kernel.Call) (Verdict, error) { return Verdict{}, nil }
	pass := func(context.Context, *kernel.Call, kernel.Result, error) (Verdict, error) { return Verdict{}, nil }
	noBuiltins := "scrubber: {enabled: false}\noutput_limit: {enabled: false}\n"
	cases := []struct {
		name string
		h    func(b *testing.B) kernel.Handler
	}{
		{"bare", func(*testing.B) kernel.Handler { return noop }},
		{"3-go-hooks", func(*testing.B) kernel.Handler {
			return compose([]kernel.Hook{Before("a", allow), After("b", pass), Before("c", allow)}, noop)
		}},
		{"3-go-hooks-with-matchers", func(*testing.B) kernel.Handler {
			return compose([]kernel.Hook{Before("a", allow, When(m)), After("b", pass, When(m)), Before("c", allow, When(m))}, noop)
		}},
		{"3-declarative-rules", func(b *testing.B) kernel.Handler {
			ch := mustChain(b, noBuiltins+`
rules:
  - {name: a, phase: before, match: 'tool == "echo"', block_when: 'args.text == "rm"'}
  - {name: b, match: '"fs" in tags', set_args: '{"text": args.text}'}
  - {name: c, redact: ['password=\S+']}
`)
			return ch.Hook()(noop)
		}},
		{"chain-defaults-scrubber-and-limit", func(b *testing.B) kernel.Handler {
			return mustChain(b, "{}").Hook()(noop)
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			h := tc.h(b)
			c := testCall(b)
			ctx := context.Background()
			b.ReportAllocs()
			cpu := testutil.CPUTime()
			for b.Loop() {
				if _, err := h.Handle(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// reportCPU adds the process CPU time per operation since start (cpu-ns/op)
// to a benchmark's result.
func reportCPU(b *testing.B, start time.Duration) {
	if end := testutil.CPUTime(); end > 0 && b.N > 0 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkCommandHookRoundTrip measures one command hook run: fork and
// exec of a /bin/sh script, the input on stdin, the reply on stdout.
func BenchmarkCommandHookRoundTrip(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"exit-0", `IFS= read -r input; exit 0`},
		{"json-reply", `IFS= read -r input; printf '%s\n' '{"decision":"allow","additional_context":"ok"}'`},
		{"example-block-rm", ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			argv := []string{"../examples/hooks/block-rm.sh"}
			if tc.body != "" {
				argv = []string{shellHook(b, tc.body)}
			}
			ch := mustChain(b, "scrubber: {enabled: false}\noutput_limit: {enabled: false}\n"+commandRule("h", PhaseBefore, argv, ""))
			h := ch.Hook()(noop)
			c := testCall(b)
			ctx := context.Background()
			for b.Loop() {
				res, err := h.Handle(ctx, c)
				if err != nil || !strings.HasPrefix(res.Content, "ok") {
					b.Fatalf("%q %v", res.Content, err)
				}
			}
		})
	}
}

// benchOutput is about 1 MiB of tool output: source code, logs, paths and
// hashes, with the corpus's secrets and look-alikes spread through it.
func benchOutput(b *testing.B, withSecrets bool) string {
	src, err := os.ReadFile("scrub.go")
	if err != nil {
		b.Fatal(err)
	}
	c := loadCorpus(b)
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		sb.Write(src)
		fmt.Fprintf(&sb, "2026-11-22T12:00:%02d.123Z level=info msg=\"request done\" path=/api/v1/items/%d status=200 dur=12ms\n", i%60, i)
		if withSecrets {
			sb.WriteString(c.Secrets[i%len(c.Secrets)].Text + "\n")
		}
		sb.WriteString(c.Lookalikes[i%len(c.Lookalikes)].Text + "\n")
	}
	return sb.String()[:1<<20]
}

// BenchmarkScrubber1MiB scrubs 1 MiB of tool output.
func BenchmarkScrubber1MiB(b *testing.B) {
	s := defaultScrubber(b)
	for _, tc := range []struct {
		name    string
		secrets bool
	}{{"with-secrets", true}, {"no-secrets", false}} {
		b.Run(tc.name, func(b *testing.B) {
			text := benchOutput(b, tc.secrets)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			cpu := testutil.CPUTime()
			for b.Loop() {
				s.Scrub(text)
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkScrubberShort scrubs what kernel's BenchmarkLoop scrubs in a
// run: a short prompt (ScrubLines, as the kernel's ScrubInput) and a short
// tool result (Scrub), where the scan's fixed costs, not its bytes, count.
func BenchmarkScrubberShort(b *testing.B) {
	s := defaultScrubber(b)
	b.ReportAllocs()
	cpu := testutil.CPUTime()
	for b.Loop() {
		if s.ScrubLines("what is in the workspace?") == "" || scrubbed(s, "package main") == "" {
			b.Fatal("scrubbed to nothing")
		}
	}
	reportCPU(b, cpu)
}

func scrubbed(s *Scrubber, text string) string {
	out, _ := s.Scrub(text)
	return out
}

// hostileInputs are 1 MiB texts built to make a careless scanner
// quadratic.
func hostileInputs() map[string]string {
	fill := func(unit func(i int) string) string {
		var sb strings.Builder
		for i := 0; sb.Len() < 1<<20; i++ {
			sb.WriteString(unit(i))
		}
		return sb.String()
	}
	return map[string]string{
		"pem-headers-without-end":  fill(func(i int) string { return fmt.Sprintf("-----BEGIN L%d-----\n", i) }),
		"private-keys-without-end": fill(func(int) string { return "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n" }),
		"certificates": fill(func(int) string {
			return "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0B\n-----END CERTIFICATE-----\n"
		}),
		"authorization-one-line": fill(func(int) string { return "Authorization: " }),
		"quoted-values-one-line": fill(func(int) string { return `password="` }),
		"markers-and-secrets":    fill(func(int) string { return "[REDACTED]AKIA6PYCDYBK155OXTZ7 " }),
		"url-schemes":            fill(func(int) string { return "a://b:c" }),
		"one-long-token":         fill(func(i int) string { return "Zk3lQ9xB" }),
		"wrapped-base64":         fill(func(int) string { return "QmFzZTY0IGlzIGEgZ3JvdXAgb2YgYmluYXJ5LXRvLXRleHQgZW5jb2Rpbmcgc2No\n" }),
		"jwt-prefixes":           fill(func(int) string { return "eyJ.eyJ." }),
		"spaces-between-keys":    fill(func(int) string { return "token" + strings.Repeat(" ", 200) }),
	}
}

// BenchmarkScrubberHostile scrubs 1 MiB inputs built to be slow.
func BenchmarkScrubberHostile(b *testing.B) {
	s := defaultScrubber(b)
	for name, text := range hostileInputs() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				s.Scrub(text)
			}
		})
	}
}
