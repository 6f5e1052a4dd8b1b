package main

import (
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSessionsSubcommandsHaveTheirOwnFlags: each subcommand of `kernel
// sessions` parses with a FlagSet of its own, so its help lists its flags
// and the common ones, and no flag of another subcommand.
func TestSessionsSubcommandsHaveTheirOwnFlags(t *testing.T) {
	common := flag.NewFlagSet("", flag.ContinueOnError)
	(&commonFlags{}).register(common)
	for _, s := range sessions.subs {
		own := flag.NewFlagSet("", flag.ContinueOnError)
		s.flags(own)
		_, out, _, _ := status(t, "help", "sessions", s.name)
		if !strings.HasPrefix(out, "Usage: kernel sessions "+s.name+" [flags]") {
			t.Errorf("help sessions %s:\n%s", s.name, out)
		}
		for _, other := range sessions.subs {
			fs := flag.NewFlagSet("", flag.ContinueOnError)
			other.flags(fs)
			fs.VisitAll(func(f *flag.Flag) {
				listed := strings.Contains(out, "\n  --"+f.Name+" ") || strings.Contains(out, "\n  --"+f.Name+"\n")
				if mine := own.Lookup(f.Name) != nil || common.Lookup(f.Name) != nil; listed != mine {
					t.Errorf("help sessions %s lists --%s: %t, want %t", s.name, f.Name, listed, mine)
				}
			})
		}
	}
	// Every line of the group's usage is a subcommand of the table.
	var listed []string
	for _, m := range subcommandLine.FindAllStringSubmatch(sessions.usage(), -1) {
		listed = append(listed, m[1])
	}
	var names []string
	for _, s := range sessions.subs {
		names = append(names, s.name)
	}
	if !slices.Equal(listed, names) {
		t.Errorf("the usage lists %v, the table has %v", listed, names)
	}
}

// TestSessionsNeedTheStoreCapability: a store without an optional
// capability (kernel/store.go) makes the subcommand that needs it fail
// with a sentence saying so, not a type error or a crash. The memory store
// can delete sessions and nothing else.
func TestSessionsNeedTheStoreCapability(t *testing.T) {
	dir := writeFiles(t, t.TempDir(), map[string]string{"kernel.yaml": "store: {kind: memory}\n", "s.jsonl": "{}\n"})
	conf := filepath.Join(dir, "kernel.yaml")
	for args, want := range map[string]string{
		"export s1":                  "this store cannot export sessions",
		"import " + dir + "/s.jsonl": "this store cannot import sessions",
		"gc --older-than 30d":        "this store cannot collect old sessions",
		"fsck":                       "this store cannot check its sessions",
	} {
		_, _, err := cli(t, append(append([]string{"sessions"}, strings.Fields(args)...), "--config", conf)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("sessions %s on a memory store: %v, want %q", args, err, want)
		}
	}
	if _, _, err := cli(t, "sessions", "rm", "nope", "--config", conf); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("sessions rm on a memory store: %v (it can delete: want not found)", err)
	}
}
