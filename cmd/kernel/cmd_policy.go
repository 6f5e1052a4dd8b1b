package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentkernel/agentkernel/policy"
)

const policyUsage = `Usage: kernel policy SUBCOMMAND [flags]

  check FILE                      parse, compile and lint a policy; warn of
                                  deprecated names (turn.* is now run.*)
  test [-v|--json] FILE...        run the policies' own tests (exit 1 on failure)
  explain FILE --input CASE.yaml  show how every rule evaluates for one input
  replay FILE --session ID        re-decide a stored session's tool calls under FILE
  diff OLD NEW [SESSIONS] [--expect FROM:TO[@RULE]]... [--json]
                                  re-decide stored sessions' calls and surfaces under
                                  both files: what changes, by which rule, and NEW's
                                  coverage; exit 1 on an unexpected change between
                                  allow and deny/ask
  coverage FILE [SESSIONS] [--json]
                                  rules no stored call made match, tools only the
                                  default decided

SESSIONS: every stored session (default), --since AGE|DATE (7d, 12h,
2026-11-01), --session ID (repeatable), or --exports DIR (a directory of
` + "`kernel sessions export`" + ` files, *.jsonl).

Tool names are checked against the tools ` + "`kernel run`" + ` with the same flags
would register (--config, or the discovered kernel.yaml; the embedded
defaults enable read_file, list_dir and search). See docs/policy.md.`

func cmdPolicy(ctx context.Context, args []string, env *cliEnv) error {
	sub, args, fs, cf, ok := subcommand("policy", policyUsage, args, env)
	if !ok {
		return nil
	}
	verbose := fs.Bool("v", false, "test: list every test, not only failures")
	asJSON := fs.Bool("json", false, "test, diff, coverage: print the results as JSON")
	input := fs.String("input", "", "explain: the input case `FILE` (YAML)")
	var sessions stringList
	fs.Var(&sessions, "session", "replay, diff, coverage: the stored session `ID` (repeatable for diff and coverage)")
	var expect stringList
	fs.Var(&expect, "expect", "diff: a change the new file is meant to make, `FROM:TO[@RULE]` (allow:deny@no-curl; any for any effect); repeatable")
	since := fs.String("since", "", "diff, coverage: only sessions updated in the last `AGE` (7d, 12h) or since a date (2026-11-01, RFC 3339)")
	exports := fs.String("exports", "", "diff, coverage: re-decide the exported sessions (*.jsonl) of `DIR` instead of the store")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return exitError{code: 2, msg: "policy " + sub + " needs a policy file"}
	}
	// The tools a policy is linted against are the ones `kernel run` with
	// the same flags would register (the same configuration discovery and
	// tool loading), so check and run agree.
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	a, err := newToolsApp(ctx, cfg, env.stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	specs := a.tools.Specs()
	opts := policyOptions(cfg, specs)
	opts.Progress = progressLine(env.stderr)
	if sub != "check" { // test and explain run the tests or none; diffs compile
		opts.Cache = nil
	}
	switch sub {
	case "check":
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
	case "test":
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
	case "explain":
		if *input == "" {
			return exitError{code: 2, msg: "policy explain needs --input CASE.yaml"}
		}
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
	case "diff", "coverage":
		return policyDiff(ctx, a, env, sub, pos, opts, diffFlags{sessions: sessions, expect: expect, since: *since, exports: *exports, json: *asJSON})
	case "replay":
		if len(sessions) != 1 {
			return exitError{code: 2, msg: "policy replay needs one --session ID"}
		}
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
		rep, err := policy.Replay(ctx, p, sess, specs)
		if err != nil {
			return err
		}
		return rep.Format(env.stdout)
	}
	fmt.Fprintln(env.stderr, policyUsage)
	return exitError{code: 2, msg: fmt.Sprintf("unknown policy subcommand %q", sub)}
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
