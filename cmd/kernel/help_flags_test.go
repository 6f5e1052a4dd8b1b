package main

import (
	"flag"
	"io"
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

// helpCase is a command or a group's subcommand and the FlagSet it
// parses with.
type helpCase struct {
	name string
	args []string
	fs   *flag.FlagSet
}

// helpCases is every command and subcommand with flags: a group's from
// its table, another command's from running it with --help.
func helpCases(t *testing.T) []helpCase {
	var cases []helpCase
	for _, c := range commands() {
		if c.group != nil {
			for _, s := range c.group.all() {
				fs, _, _ := s.flagSet(c.name, io.Discard)
				args := []string{c.name}
				if s.name != "" {
					args = append(args, s.name)
				}
				cases = append(cases, helpCase{fs.Name(), args, fs})
			}
			continue
		}
		if col := collect(t.Context(), c, []string{"--help"}); len(col.sets) > 0 {
			cases = append(cases, helpCase{c.name, []string{c.name}, col.sets[0]})
		}
	}
	return cases
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
	for _, tc := range helpCases(t) {
		fs := tc.fs
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
			fs.VisitAll(func(f *flag.Flag) { parsed = append(parsed, f.Name) })
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
	for name := range commonFlagsOf {
		if !seen[name] {
			t.Errorf("commonFlagsOf names %q, which is no command or subcommand", name)
		}
	}
}
