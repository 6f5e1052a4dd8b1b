package main

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/serve"
)

// TestKeysHelpListsEveryScope: `kernel keys create --help` (and `kernel
// help keys create`) shows the NAME it needs and lists every scope of
// serve's one list, metrics included, and a missing --scopes says them
// all too.
func TestKeysHelpListsEveryScope(t *testing.T) {
	for _, args := range [][]string{{"keys", "create", "--help"}, {"help", "keys", "create"}} {
		code, out, _, _ := status(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		if !strings.HasPrefix(out, "Usage: kernel keys create [flags] NAME\n") {
			t.Errorf("%v: the usage line does not show NAME:\n%s", args, out)
		}
		i := strings.Index(out, "--scopes")
		if i < 0 {
			t.Fatalf("%v: no --scopes:\n%s", args, out)
		}
		line := out[i:]
		line = line[:strings.Index(line, "\n  --")]
		for _, s := range serve.Scopes() {
			if !regexp.MustCompile(`\b` + string(s) + `\b`).MatchString(line) {
				t.Errorf("%v: --scopes' help lacks %s: %q", args, s, line)
			}
		}
	}
	_, _, _, msg := status(t, "keys", "create", "ops", "--keys", t.TempDir()+"/keys.json")
	for _, s := range serve.Scopes() {
		if !strings.Contains(msg, string(s)) {
			t.Errorf("keys create without --scopes: %q lacks %s", msg, s)
		}
	}
}

// TestServeFlagDefaults: kernel serve's limit flags default to
// serve.DefaultLimits, and the flags table of docs/serve.md shows every
// flag's default as the command has it.
func TestServeFlagDefaults(t *testing.T) {
	col := collect(t.Context(), command{name: "serve", run: cmdServe}, []string{"--help"})
	if len(col.sets) == 0 {
		t.Fatal("serve made no FlagSet")
	}
	fs := col.sets[0]
	d := serve.DefaultLimits()
	for name, want := range map[string]int64{"max-runs": int64(d.MaxRuns), "max-runs-per-key": int64(d.MaxRunsPerKey), "max-body": d.MaxBodyBytes,
		"max-streams": int64(d.MaxStreams), "max-streams-per-key": int64(d.MaxStreamsPerKey)} {
		if got := fs.Lookup(name).DefValue; got != strconv.FormatInt(want, 10) {
			t.Errorf("--%s defaults to %s, serve.DefaultLimits to %d", name, got, want)
		}
	}
	f, err := os.Open("../../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| (`--[^|]*`) \\| ([^|]*) \\|")
	flagName := regexp.MustCompile("`--([a-z-]+)")
	checked := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		names := flagName.FindAllStringSubmatch(m[1], -1)
		defaults := strings.Split(m[2], " / ")
		for i, n := range names {
			fl := fs.Lookup(n[1])
			if fl == nil {
				t.Errorf("docs/serve.md: %s is no flag of kernel serve", n[1])
				continue
			}
			if len(defaults) != len(names) {
				if i == 0 && strings.TrimSpace(m[2]) != "" && len(defaults) != 1 {
					t.Errorf("docs/serve.md: %s: %d defaults for %d flags", m[1], len(defaults), len(names))
				}
				continue
			}
			doc := ""
			if c := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(defaults[i]); c != nil {
				doc = c[1]
			}
			if want := fl.DefValue; doc != want && want != "" && want != "false" {
				t.Errorf("docs/serve.md: --%s defaults to %q, the flag to %q", n[1], doc, want)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Errorf("checked %d defaults in docs/serve.md's flags table: the table changed shape", checked)
	}
}
