package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// A command group (`kernel sessions`, `kernel policy`, ...) is a table of
// subcommands, the one way a command has subcommands. Each subcommand has
// a FlagSet of its own, made of the common flags it reads
// (commonFlagsOf) and the flags it registers, so `kernel GROUP SUB
// --help` and `kernel help GROUP SUB` list exactly what it accepts, a flag
// of another subcommand is a usage error naming the one it belongs to,
// and the group's usage, help and shell completion are made from the
// table (describe), never from usage text.
type group struct {
	name string
	// footer ends the group's usage: what the subcommands share, where
	// the docs are ("Flags: --config FILE, --store DIR").
	footer string
	// bare, when set, is what the group does when its first argument is
	// not one of its subcommands: `kernel tools [NAME...]` lists tools
	// where `kernel tools import` imports them. Its name is empty; its
	// flags are the group's own (help and completion show them).
	bare *subcmd
	subs []subcmd
}

// subcmd is one subcommand of a group.
type subcmd struct {
	name string
	// synopsis follows the name in the group's usage ("ID [--full|--json]");
	// summary is the rest of that line; its later lines are indented under
	// the first.
	synopsis, summary string
	// args is the positional synopsis of its own usage line ("ID..."),
	// need how many positional arguments it takes at least, and needs
	// what to call them when they are missing ("a session id").
	args  string
	need  int
	needs string
	// flags registers the subcommand's own flags on fs and returns the
	// function that runs it with them.
	flags func(fs *flag.FlagSet) subRun
}

// subRun runs a subcommand: cf holds the common flags, pos the positional
// arguments (at least need of them).
type subRun func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error

// noFlags is the flags of a subcommand that has none of its own.
func noFlags(run subRun) func(*flag.FlagSet) subRun {
	return func(*flag.FlagSet) subRun { return run }
}

// usageColumn is where a subcommand's summary starts in its group's
// usage; a longer synopsis puts the summary on the lines below it.
const usageColumn = 23

// usage is the group's usage: one line (or more) a subcommand.
func (g *group) usage() string {
	var b strings.Builder
	subs := g.subs
	if g.bare != nil {
		fmt.Fprintf(&b, "Usage: kernel %s [flags] %s\n       kernel %s SUBCOMMAND [flags]\n\n", g.name, g.bare.args, g.name)
		subs = append([]subcmd{*g.bare}, subs...)
	} else {
		fmt.Fprintf(&b, "Usage: kernel %s SUBCOMMAND [flags]\n\n", g.name)
	}
	for _, s := range subs {
		head := strings.TrimSpace(s.name + " " + s.synopsis)
		lines := strings.Split(s.summary, "\n")
		if len(head) > usageColumn {
			fmt.Fprintf(&b, "  %s\n", head)
		} else {
			fmt.Fprintf(&b, "  %-*s %s\n", usageColumn, head, lines[0])
			lines = lines[1:]
		}
		for _, l := range lines {
			fmt.Fprintf(&b, "  %-*s %s\n", usageColumn, "", l)
		}
	}
	if g.footer != "" {
		fmt.Fprintf(&b, "\n%s", g.footer)
	}
	return strings.TrimRight(b.String(), "\n")
}

// all is the group's subcommands, its bare one first.
func (g *group) all() []*subcmd {
	var out []*subcmd
	if g.bare != nil {
		out = append(out, g.bare)
	}
	for i := range g.subs {
		out = append(out, &g.subs[i])
	}
	return out
}

func (g *group) find(name string) (*subcmd, bool) {
	for i := range g.subs {
		if g.subs[i].name == name {
			return &g.subs[i], true
		}
	}
	return nil, false
}

// run is `kernel GROUP SUB [flags] [args]`.
func (g *group) run(ctx context.Context, args []string, env *cliEnv) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") || len(args) == 0 && g.bare == nil {
		fmt.Fprintln(env.stdout, g.usage())
		if g.bare != nil {
			fs, _, _ := g.bare.flagSet(g.name, io.Discard)
			printFlags(env.stdout, fs)
		}
		return nil
	}
	var s *subcmd
	if len(args) > 0 {
		s, _ = g.find(args[0])
	}
	switch {
	case s != nil:
		args = args[1:]
	case g.bare != nil:
		s = g.bare
	default:
		fmt.Fprintln(env.stderr, g.usage())
		return usageError("unknown %s subcommand %q", g.name, args[0])
	}
	fs, cf, run := s.flagSet(g.name, env.stderr)
	rest := args
	if !helpRequested(rest) {
		if err := g.foreignFlag(s, fs, rest); err != nil {
			return err
		}
	}
	pos, err := parseArgs(fs, rest)
	if err != nil {
		return err
	}
	if len(pos) < s.need {
		return usageError("%s needs %s", fs.Name(), s.needs)
	}
	return run(ctx, cf, env, pos)
}

// flagSet makes the subcommand's FlagSet: its own flags and the common
// ones it reads. Its usage is the usage line, the summary and the flags.
func (s *subcmd) flagSet(group string, w io.Writer) (*flag.FlagSet, *commonFlags, subRun) {
	fs := newFlagSet(strings.TrimSpace(group+" "+s.name), s.args, w)
	fs.Usage = func() {
		fmt.Fprintln(w, usageLine(fs.Name(), s.args))
		if s.summary != "" {
			fmt.Fprintf(w, "\n%s\n", s.summary)
		}
		printFlags(w, fs)
	}
	cf := &commonFlags{}
	cf.register(fs)
	return fs, cf, s.flags(fs)
}

// foreignFlag reports a flag in args that s does not have but other
// subcommands of the group do: `sessions ls --full` says --full belongs to
// show, instead of only that it is not defined.
func (g *group) foreignFlag(s *subcmd, fs *flag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		name, ok := strings.CutPrefix(a, "-")
		if !ok || name == "" {
			continue
		}
		name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
		if fs.Lookup(name) != nil {
			continue
		}
		var owners []string
		for _, other := range g.all() {
			ofs, _, _ := other.flagSet(g.name, io.Discard)
			if ofs.Lookup(name) != nil {
				owners = append(owners, cmp.Or(other.name, g.name))
			}
		}
		if len(owners) > 0 {
			return usageError("--%s is not a flag of %s (it belongs to %s)", name, fs.Name(), strings.Join(owners, ", "))
		}
	}
	return nil
}
