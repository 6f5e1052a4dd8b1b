package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// The exit statuses of every command (README.md, "Exit status").
const (
	exitOK        = 0
	exitFailure   = 1   // the command ran and failed: one line on stderr says why
	exitUsage     = 2   // the command line is wrong: unknown command, flag or value
	exitInterrupt = 130 // cancelled with Ctrl-C (SIGINT) or SIGTERM
)

// exitStatus maps a command's error to the process's exit status and the
// message for stderr (empty when there is nothing more to say).
func exitStatus(err error) (int, string) {
	if err == nil {
		return exitOK, ""
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code, ee.msg
	}
	return exitFailure, errorText(err)
}

// usageError is a wrong command line: exit status 2.
func usageError(format string, args ...any) error {
	return exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// helpRequested reports whether the arguments ask for help (-h, -help or
// --help before any "--"), so the help goes to stdout and the command
// stops after printing it.
func helpRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// findCommand returns the command table entry called name.
func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// cmdHelp is `kernel help [COMMAND [SUBCOMMAND]]`: the general help, or
// one command's own usage and flags (the same as `kernel COMMAND --help`).
func cmdHelp(ctx context.Context, args []string, env *cliEnv) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		usage(env.stdout)
		return nil
	}
	c, ok := findCommand(args[0])
	if !ok {
		usage(env.stderr)
		return usageError("no command %q (kernel help lists them)", args[0])
	}
	helpEnv := &cliEnv{stdin: env.stdin, stdout: env.stdout, stderr: env.stdout}
	if err := c.run(ctx, append(append([]string{}, args[1:]...), "--help"), helpEnv); err != nil {
		if ee, ok := err.(exitError); ok && ee.code == exitOK {
			return nil
		}
		return err
	}
	return nil
}

// flagCollector is the stdout and stderr of a command run only to learn
// its flags (for help and completion): newFlagSet records every FlagSet
// made while writing to it, subcommand records the group's usage, and the
// command stops at --help before doing anything.
type flagCollector struct {
	bytes.Buffer
	sets       []*flag.FlagSet
	groupUsage string
}

// describedCommand is what a command table entry accepts, learnt by running
// it with --help: its flags, and for a group its subcommands with theirs.
type describedCommand struct {
	name    string
	summary string
	flags   []*flag.Flag
	subs    []describedCommand
}

// subcommandLine matches a subcommand in a group's usage text: two spaces
// of indent, then the name.
var subcommandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z0-9-]*)\b(.*)$`)

var subcommandName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// describe learns a command's flags and subcommands by running it with
// --help against a flagCollector. New entries in commands() are described
// for free as long as they parse their flags with newFlagSet and parseArgs
// (and groups use subcommand).
func describe(ctx context.Context, c command) describedCommand {
	d := describedCommand{name: c.name, summary: c.summary}
	col := collect(ctx, c, []string{"--help"})
	if len(col.sets) > 0 {
		d.flags = flagsOf(col.sets[0])
	}
	if col.groupUsage == "" {
		return d
	}
	seen := map[string]bool{}
	for _, m := range subcommandLine.FindAllStringSubmatch(col.groupUsage, -1) {
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		sub := describedCommand{name: name, summary: strings.TrimSpace(subSummary(m[2]))}
		if sc := collect(ctx, c, []string{name, "--help"}); len(sc.sets) > 0 {
			sub.flags = flagsOf(sc.sets[0])
		}
		d.subs = append(d.subs, sub)
	}
	return d
}

// subSummary drops the argument synopsis in front of a usage line's text
// ("ID [--full]        a readable transcript" -> "a readable transcript").
func subSummary(s string) string {
	if i := strings.Index(s, "  "); i >= 0 {
		return strings.TrimSpace(s[i:])
	}
	return s
}

func collect(ctx context.Context, c command, args []string) *flagCollector {
	col := &flagCollector{}
	env := &cliEnv{stdin: strings.NewReader(""), stdout: col, stderr: col}
	_ = c.run(ctx, args, env) // stops at --help
	return col
}

func flagsOf(fs *flag.FlagSet) []*flag.Flag {
	var out []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f) })
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// recordFlagSet is called by newFlagSet: a FlagSet made for a describe run
// is remembered there.
func recordFlagSet(w io.Writer, fs *flag.FlagSet) {
	if col, ok := w.(*flagCollector); ok {
		col.sets = append(col.sets, fs)
	}
}

// recordGroupUsage is called by subcommand with the group's usage text.
func recordGroupUsage(w io.Writer, text string) {
	if col, ok := w.(*flagCollector); ok {
		col.groupUsage = text
	}
}

// subcommandFlagOwner reads the "sub: " or "sub1, sub2: " prefix of a
// group's flag usage: the subcommands the flag belongs to, or nil for a
// flag every subcommand takes.
func subcommandFlagOwner(usage string) []string {
	i := strings.Index(usage, ": ")
	if i <= 0 {
		return nil
	}
	head := usage[:i]
	var subs []string
	for _, s := range strings.Split(head, ",") {
		s = strings.TrimSpace(s)
		if !subcommandName.MatchString(s) {
			return nil
		}
		subs = append(subs, s)
	}
	return subs
}

// flagBelongs reports whether flag f is one of subcommand sub's own flags
// (in a FlagSet named "GROUP SUB").
func flagBelongs(fs *flag.FlagSet, f *flag.Flag) bool {
	_, sub, ok := strings.Cut(fs.Name(), " ")
	if !ok {
		return true
	}
	owners := subcommandFlagOwner(f.Usage)
	if owners == nil {
		return true
	}
	for _, o := range owners {
		if o == sub {
			return true
		}
	}
	return false
}

// printFlags prints fs's flags the way flag.PrintDefaults does, leaving
// out the flags of a group's other subcommands: the command's own first,
// then the common ones it reads under their group's title
// (flagGroupTitles).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var own []*flag.Flag
	common := map[flagGroup][]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) {
		if !flagBelongs(fs, f) {
			return
		}
		if g, ok := commonFlagGroup[f.Name]; ok {
			for _, t := range flagGroupTitles {
				if t.groups&g != 0 {
					common[t.groups] = append(common[t.groups], f)
				}
			}
			return
		}
		own = append(own, f)
	})
	if len(own) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		for _, f := range own {
			printFlag(w, f)
		}
	}
	for _, t := range flagGroupTitles {
		if fl := common[t.groups]; len(fl) > 0 {
			fmt.Fprintf(w, "\n%s:\n", t.title)
			for _, f := range fl {
				printFlag(w, f)
			}
		}
	}
}

// printFlag prints one flag as flag.PrintDefaults does.
func printFlag(w io.Writer, f *flag.Flag) {
	{
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		if len(line) <= 6 {
			line += "\t"
		} else {
			line += "\n    \t"
		}
		if owners := subcommandFlagOwner(usage); owners != nil {
			usage = strings.TrimSpace(usage[strings.Index(usage, ": ")+2:])
		}
		line += strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			line += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	}
}

// checkFlagOwners rejects a flag given to a subcommand it does not belong
// to (`sessions ls --full`): a usage error, not silently ignored.
func checkFlagOwners(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && !flagBelongs(fs, f) {
			err = usageError("--%s is not a flag of %s (it belongs to %s)", f.Name, fs.Name(), strings.Join(subcommandFlagOwner(f.Usage), ", "))
		}
	})
	return err
}
