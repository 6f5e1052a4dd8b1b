package main

import (
	"flag"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// helpFlag matches a flag line of a command's help ("  --name ...").
var helpFlag = regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)`)

// commonFlagSample is a value each common flag accepts.
var commonFlagSample = map[string]string{
	"config": "kernel.yaml", "log-level": "warn", "model": "m", "base-url": "http://127.0.0.1:1/v1",
	"api-key-env": "SOME_KEY", "max-turns": "3", "provider": "scripted", "script": "s.yaml",
	"model-timeout": "1m", "model-idle-timeout": "30s", "fallback": "m2", "workspace": ".",
	"policy": "p.yaml", "no-cache": "true", "store": "st", "tool-protocol": "native", "tool-format": "json",
}

// TestHelpListsTheFlagsACommandReads: every command's and subcommand's
// help lists exactly the flags it parses, its own first, then the common
// ones it reads under their group's title (commonFlagsOf), and nothing
// else: each common flag its help leaves out is a usage error, each it
// lists is accepted. Commands that never call a model list no model flag.
func TestHelpListsTheFlagsACommandReads(t *testing.T) {
	if len(commonFlagSample) != len(commonFlagGroup) {
		t.Fatalf("commonFlagSample has %d flags, commonFlagGroup %d: add the new flag to both", len(commonFlagSample), len(commonFlagGroup))
	}
	seen := map[string]bool{}
	for _, c := range commands() {
		d := describe(t.Context(), c)
		cases := []struct {
			name string
			args []string
		}{{c.name, []string{c.name}}}
		subs := map[string]bool{}
		for _, s := range d.subs {
			subs[s.name] = true
		}
		for name := range commonFlagsOf { // groups whose usage describe cannot read
			if g, sub, ok := strings.Cut(name, " "); ok && g == c.name {
				subs[sub] = true
			}
		}
		for _, s := range slices.Sorted(maps.Keys(subs)) {
			cases = append(cases, struct {
				name string
				args []string
			}{c.name + " " + s, []string{c.name, s}})
		}
		for _, tc := range cases {
			col := collect(t.Context(), c, append(slices.Clone(tc.args[1:]), "--help"))
			if len(col.sets) == 0 {
				continue // a group's own usage, or a command without flags
			}
			fs := col.sets[0]
			seen[fs.Name()] = true
			t.Run(tc.name, func(t *testing.T) {
				code, help, _, _ := status(t, append([]string{"help"}, tc.args...)...)
				if code != 0 {
					t.Fatalf("kernel help %s: exit %d", tc.name, code)
				}
				var listed, parsed []string
				for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
					listed = append(listed, m[1])
				}
				fs.VisitAll(func(f *flag.Flag) {
					if flagBelongs(fs, f) {
						parsed = append(parsed, f.Name)
					}
				})
				sort.Strings(listed)
				sort.Strings(parsed)
				if !slices.Equal(listed, parsed) {
					t.Errorf("help lists %v, the command parses %v:\n%s", listed, parsed, help)
				}
				for name, sample := range commonFlagSample {
					in := slices.Contains(listed, name)
					code, _, stderr, _ := status(t, append(slices.Clone(tc.args), "--"+name+"="+sample, "--help")...)
					switch {
					case in && code != 0:
						t.Errorf("--%s is in the help but refused (exit %d): %s", name, code, stderr)
					case !in && code != exitUsage:
						t.Errorf("--%s is not in the help but accepted (exit %d)", name, code)
					}
				}
				// A flag of a FlagSet the group's subcommands share says
				// whose it is as "sub: ..." or "sub1, sub2: ..."; one that
				// starts with a subcommand's name any other way ("serve
				// --http: ...") would show in every subcommand's help.
				fs.VisitAll(func(f *flag.Flag) {
					first := strings.FieldsFunc(f.Usage, func(r rune) bool { return r == ' ' || r == ':' || r == ',' })
					if len(first) > 0 && subs[first[0]] && subcommandFlagOwner(f.Usage) == nil {
						t.Errorf("--%s reads as %s's (%q) but is not marked as its: it shows in every subcommand's help", f.Name, first[0], f.Usage)
					}
				})
				groups, ok := commonFlagsOf[fs.Name()]
				if ok && groups&flagsModel == 0 && strings.Contains(help, "\nModel:\n") {
					t.Errorf("a command that calls no model lists the model's flags:\n%s", help)
				}
				// Own flags come first, then the common ones under titles.
				if i, j := strings.Index(help, "\nFlags:\n"), strings.Index(help, "\nConfiguration:\n"); i >= 0 && j >= 0 && i > j {
					t.Errorf("the common flags come before the command's own:\n%s", help)
				}
			})
		}
	}
	for name := range commonFlagsOf {
		if !seen[name] {
			t.Errorf("commonFlagsOf names %q, which is no command or subcommand with flags", name)
		}
	}
}
