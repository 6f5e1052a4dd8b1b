package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/policy"
)

// policyGroup is `kernel policy`.
var policyGroup = group{
	name: "policy",
	footer: `SESSIONS: every stored session (default), --since AGE|DATE (7d, 12h,
2026-11-01), --session ID (repeatable), or --exports DIR (a directory of
` + "`kernel sessions export`" + ` files, *.jsonl).

Tool names are checked against the tools ` + "`kernel run`" + ` with the same flags
would register (--config, or the discovered kernel.yaml; the embedded
defaults enable read_file, list_dir and search). See docs/policy.md.`,
	subs: []subcmd{
		{name: "check", synopsis: "FILE...", summary: "parse, compile and lint a policy; warn of\ndeprecated names (turn.* is now run.*)",
			args: "FILE...", need: 1, needs: "a policy file", flags: noFlags(policyCheck)},
		{name: "test", synopsis: "[-v|--json] FILE...", summary: "run the policies' own tests (exit 1 on failure)",
			args: "FILE...", need: 1, needs: "a policy file", flags: policyTest},
		{name: "explain", synopsis: "FILE --input CASE.yaml", summary: "show how every rule evaluates for one input",
			args: "FILE", need: 1, needs: "a policy file", flags: policyExplain},
		{name: "replay", synopsis: "FILE --session ID", summary: "re-decide a stored session's tool calls under FILE",
			args: "FILE", need: 1, needs: "a policy file", flags: policyReplay},
		{name: "diff", synopsis: "OLD NEW [SESSIONS] [--expect FROM:TO[@RULE]]... [--json]", summary: `re-decide stored sessions' calls and surfaces under
both files: what changes, by which rule, and NEW's
coverage; exit 1 on an unexpected change between
allow and deny/ask`,
			args: "OLD NEW", need: 2, needs: "two policy files (OLD NEW)", flags: policyDiffCmd("diff")},
		{name: "coverage", synopsis: "FILE [SESSIONS] [--json]", summary: `rules no stored call made match, tools only the
default decided`,
			args: "FILE", need: 1, needs: "a policy file", flags: policyDiffCmd("coverage")},
	},
}

// policyTools is what every policy subcommand checks a file against:
// the configuration, and the tools ` + "`kernel run`" + ` with the same flags would
// register (the same discovery and loading), so check and run agree.
// The test cache vouches for a file's tests only for check (withCache);
// close the app when done.
func policyTools(ctx context.Context, cf *commonFlags, env *cliEnv, withCache bool) (*app, policy.Options, error) {
	cfg, err := cf.load()
	if err != nil {
		return nil, policy.Options{}, err
	}
	a, err := newToolsApp(ctx, cfg, env.stderr)
	if err != nil {
		return nil, policy.Options{}, err
	}
	opts := policyOptions(cfg, a.tools.Specs())
	opts.Progress = progressLine(env.stderr)
	if !withCache { // test and explain run the tests or none; diffs compile
		opts.Cache = nil
	}
	return a, opts, nil
}

// policyCheck is ` + "`kernel policy check FILE...`" + `.
func policyCheck(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
	a, opts, err := policyTools(ctx, cf, env, true)
	if err != nil {
		return err
	}
	defer a.Close()
	var errs []error
	for _, f := range pos {
		p, err := policy.CheckFile(ctx, f, opts)
		if err != nil {
			if ctx.Err() != nil {
				return policyCancelled(err)
			}
			if opts.ToolsFrom != "" {
				err = withConfigHint(ctx, err, f)
			}
			errs = append(errs, err)
			continue
		}
		// Uses of deprecated names still work: warnings, not errors.
		for _, d := range p.Deprecated() {
			fmt.Fprintf(env.stderr, "warning: %s\n", d)
		}
		v := p.TestVerdict()
		if v.CacheNote != "" {
			fmt.Fprintf(env.stderr, "note: %s\n", v.CacheNote)
		}
		how := fmt.Sprintf("%d tests", v.Tests)
		if v.Cached {
			how += "; passed before, verdict from the test cache"
		}
		fmt.Fprintf(env.stdout, "ok  %s (%s)\n", f, how)
	}
	if len(errs) > 0 {
		return exitError{code: 1, msg: errors.Join(errs...).Error()}
	}
	return nil
}

func policyTest(fs *flag.FlagSet) subRun {
	verbose := fs.Bool("v", false, "list every test, not only failures")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		a, opts, err := policyTools(ctx, cf, env, false)
		if err != nil {
			return err
		}
		defer a.Close()
		if *asJSON {
			res, ok, err := policyTests(ctx, pos, opts)
			if err != nil {
				return policyCancelled(err)
			}
			if err := writeJSON(env, res); err != nil {
				return err
			}
			if !ok {
				return exitError{code: exitFailure}
			}
			return nil
		}
		ok, err := policy.TestFiles(ctx, env.stdout, pos, opts, *verbose)
		if err != nil {
			return policyCancelled(err)
		}
		if !ok {
			return exitError{code: 1}
		}
		return nil
	}
}

func policyExplain(fs *flag.FlagSet) subRun {
	input := fs.String("input", "", "the input case `FILE` (YAML)")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		if *input == "" {
			return usageError("policy explain needs --input CASE.yaml")
		}
		a, opts, err := policyTools(ctx, cf, env, false)
		if err != nil {
			return err
		}
		defer a.Close()
		p, err := policy.CompileFile(ctx, pos[0], opts)
		if err != nil {
			return policyCancelled(err)
		}
		in, err := policy.ReadInput(*input)
		if err != nil {
			return err
		}
		ex, err := p.Explain(in)
		if err != nil {
			return err
		}
		return ex.Format(env.stdout)
	}
}

func policyReplay(fs *flag.FlagSet) subRun {
	var sessions stringList
	fs.Var(&sessions, "session", "the stored session `ID`")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		if len(sessions) != 1 {
			return usageError("policy replay needs one --session ID")
		}
		a, opts, err := policyTools(ctx, cf, env, false)
		if err != nil {
			return err
		}
		defer a.Close()
		p, err := policy.CompileFile(ctx, pos[0], opts)
		if err != nil {
			return policyCancelled(err)
		}
		if err := a.openStore(true); err != nil {
			return err
		}
		sess, err := a.store.Load(ctx, sessions[0])
		if err != nil {
			return err
		}
		rep, err := policy.Replay(ctx, p, sess, opts.Tools)
		if err != nil {
			return err
		}
		return rep.Format(env.stdout)
	}
}

// policyDiffCmd is ` + "`kernel policy diff`" + ` or ` + "`coverage`" + ` (sub): the
// sessions they re-decide (SESSIONS), --json, and diff's --expect.
func policyDiffCmd(sub string) func(*flag.FlagSet) subRun {
	return func(fs *flag.FlagSet) subRun {
		f := &diffFlags{}
		fs.Var(&f.sessions, "session", "the stored session `ID` (repeatable)")
		fs.StringVar(&f.since, "since", "", "only sessions updated in the last `AGE` (7d, 12h) or since a date (2026-11-01, RFC 3339)")
		fs.StringVar(&f.exports, "exports", "", "re-decide the exported sessions (*.jsonl) of `DIR` instead of the store")
		fs.BoolVar(&f.json, "json", false, "print the results as JSON")
		if sub == "diff" {
			fs.Var(&f.expect, "expect", "a change the new file is meant to make, `FROM:TO[@RULE]` (allow:deny@no-curl; any for any effect); repeatable")
		}
		return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
			a, opts, err := policyTools(ctx, cf, env, false)
			if err != nil {
				return err
			}
			defer a.Close()
			return policyDiff(ctx, a, env, sub, pos, opts, *f)
		}
	}
}

// withConfigHint adds to a policy's load error, when the file uses tools
// the embedded defaults do not register, the configuration that registers
// them: the nearest kernel.yaml in the policy file's directory or a parent
// of it (examples/kernel.yaml for examples/policies/*.yaml), loaded the
// way `--config` would load it.
func withConfigHint(ctx context.Context, err error, file string) error {
	var le *policy.LoadError
	if !errors.As(err, &le) || len(le.Unregistered) == 0 {
		return err
	}
	abs, aerr := filepath.Abs(file)
	if aerr != nil {
		return err
	}
	for dir, i := filepath.Dir(abs), 0; i < 8; dir, i = filepath.Dir(dir), i+1 {
		cand := filepath.Join(dir, projectConfigName)
		if st, serr := os.Stat(cand); serr == nil && st.Mode().IsRegular() && registersAll(ctx, cand, le.Unregistered) {
			rel := cand
			if wd, werr := os.Getwd(); werr == nil {
				if r, rerr := filepath.Rel(wd, cand); rerr == nil && !strings.HasPrefix(r, "..") {
					rel = r
				}
			}
			return fmt.Errorf("%w\nhint: %s registers %s: kernel policy check --config %s %s", err, rel, strings.Join(le.Unregistered, ", "), rel, file)
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return err
}

// registersAll reports whether the configuration file registers every
// tool named (its tools loaded as `kernel run --config file` would).
func registersAll(ctx context.Context, file string, names []string) bool {
	cfg, err := loadConfig(file)
	if err != nil {
		return false
	}
	a, err := newToolsApp(ctx, cfg, io.Discard)
	if err != nil {
		return false
	}
	defer a.Close()
	have := map[string]bool{}
	for _, s := range a.tools.Specs() {
		have[s.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}
