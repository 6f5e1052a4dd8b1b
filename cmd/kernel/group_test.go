package main

import (
	"flag"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSubcommandsHaveTheirOwnFlags: each subcommand of every group
// (sessions, policy, keys, ...) parses with a FlagSet of its own, so its
// help lists its flags and the common ones it reads, and no flag of
// another subcommand; a flag of another subcommand is a usage error
// naming it.
func TestSubcommandsHaveTheirOwnFlags(t *testing.T) {
	groups := 0
	for _, c := range commands() {
		g := c.group
		if g == nil {
			continue
		}
		groups++
		for i := range g.subs {
			s := &g.subs[i]
			mine, _, _ := s.flagSet(g.name, io.Discard)
			_, out, _, _ := status(t, "help", g.name, s.name)
			if !strings.HasPrefix(out, "Usage: kernel "+g.name+" "+s.name+" [flags]") {
				t.Errorf("help %s %s:\n%s", g.name, s.name, out)
			}
			for j := range g.subs {
				other, _, _ := g.subs[j].flagSet(g.name, io.Discard)
				other.VisitAll(func(f *flag.Flag) {
					listed := regexp.MustCompile(`\n  --` + regexp.QuoteMeta(f.Name) + `[ \t\n]`).MatchString(out)
					if has := mine.Lookup(f.Name) != nil; listed != has {
						t.Errorf("help %s %s lists --%s: %t, want %t", g.name, s.name, f.Name, listed, has)
					}
					if mine.Lookup(f.Name) == nil {
						code, _, _, msg := status(t, g.name, s.name, "--"+f.Name+"=x")
						if code != exitUsage || !strings.Contains(msg, "--"+f.Name+" is not a flag of "+g.name+" "+s.name+" (it belongs to ") || !strings.Contains(msg, g.subs[j].name) {
							t.Errorf("%s %s --%s: exit %d %q, want a usage error naming its subcommand", g.name, s.name, f.Name, code, msg)
						}
					}
				})
			}
		}
		// Every subcommand of the table heads a line of the group's usage,
		// in the table's order.
		usage := g.usage()
		at := 0
		for _, s := range g.subs {
			i := strings.Index(usage[at:], "\n  "+s.name+" ")
			if i < 0 {
				i = strings.Index(usage[at:], "\n  "+s.name+"\n")
			}
			if i < 0 {
				t.Errorf("%s's usage lacks %s (after byte %d):\n%s", g.name, s.name, at, usage)
				continue
			}
			at += i + 1
		}
	}
	if groups < 8 {
		t.Errorf("%d groups in commands(), want at least sessions, policy, keys, store, plugins, mcp, sandbox, config", groups)
	}
}

// TestOneSubcommandMechanism: a command that is not a group takes no
// subcommand: its usage line names none, so every command with
// subcommands is a group (one table, one way to parse, describe and
// complete them).
func TestOneSubcommandMechanism(t *testing.T) {
	for _, c := range commands() {
		if c.group != nil {
			continue
		}
		col := collect(t.Context(), c, []string{"--help"})
		if strings.Contains(col.String(), "SUBCOMMAND") || regexp.MustCompile(`(?m)^\s+kernel `+c.name+` [a-z]+\b`).MatchString(col.String()) {
			t.Errorf("%s is not a group but its usage names subcommands:\n%s", c.name, col.String())
		}
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
