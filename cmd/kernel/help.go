package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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
// made while writing to it, and the command stops at --help before doing
// anything.
type flagCollector struct {
	bytes.Buffer
	sets []*flag.FlagSet
}

// describedCommand is what a command table entry accepts: its flags, and
// for a group its subcommands with theirs (a group's own flags are its
// bare subcommand's: kernel tools --json).
type describedCommand struct {
	name    string
	summary string
	flags   []*flag.Flag
	subs    []describedCommand
}

// describe learns what a command accepts. A group's subcommands and their
// flags are its table's (each subcommand's FlagSet, made as when it
// runs); another command is run with --help against a flagCollector, so a
// new entry in commands() is described for free as long as it parses its
// flags with newFlagSet and parseArgs.
func describe(ctx context.Context, c command) describedCommand {
	d := describedCommand{name: c.name, summary: c.summary}
	if c.group != nil {
		if b := c.group.bare; b != nil {
			fs, _, _ := b.flagSet(c.group.name, io.Discard)
			d.flags = flagsOf(fs)
		}
		for i := range c.group.subs {
			s := &c.group.subs[i]
			fs, _, _ := s.flagSet(c.group.name, io.Discard)
			summary, _, _ := strings.Cut(s.summary, "\n")
			d.subs = append(d.subs, describedCommand{name: s.name, summary: summary, flags: flagsOf(fs)})
		}
		return d
	}
	if col := collect(ctx, c, []string{"--help"}); len(col.sets) > 0 {
		d.flags = flagsOf(col.sets[0])
	}
	return d
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

// printFlags prints fs's flags the way flag.PrintDefaults does: the
// command's own first, then the common ones it reads under their group's
// title (flagGroupTitles).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var own []*flag.Flag
	common := map[flagGroup][]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) {
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
	line += strings.ReplaceAll(usage, "\n", "\n    \t")
	if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
		line += fmt.Sprintf(" (default %q)", f.DefValue)
	}
	fmt.Fprintln(w, line)
}
