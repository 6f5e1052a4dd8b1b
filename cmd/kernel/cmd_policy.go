package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/policy"
)

const policyUsage = `Usage: kernel policy SUBCOMMAND [flags]

  check FILE                      parse, compile and lint a policy; warn of
                                  deprecated names (turn.* is now run.*)
  test [-v|--json] FILE...        run the policies' own tests (exit 1 on failure)
  explain FILE --input CASE.yaml  show how every rule evaluates for one input
  replay FILE --session ID        re-decide a stored session's tool calls under FILE

Tool names are checked against the tools ` + "`kernel run`" + ` with the same flags
would register (--config, or the discovered kernel.yaml; the embedded
defaults enable read_file, list_dir and search). See docs/policy.md.`

func cmdPolicy(ctx context.Context, args []string, env *cliEnv) error {
	sub, args, fs, cf, ok := subcommand("policy", policyUsage, args, env)
	if !ok {
		return nil
	}
	verbose := fs.Bool("v", false, "test: list every test, not only failures")
	asJSON := fs.Bool("json", false, "test: print the results as JSON")
	input := fs.String("input", "", "explain: the input case `FILE` (YAML)")
	session := fs.String("session", "", "replay: the stored session `ID`")
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
	opts := policy.Options{Tools: specs}
	switch sub {
	case "check":
		var errs []error
		for _, f := range pos {
			// CheckFile's steps, keeping the policy to report its uses of
			// deprecated names (which still work) as warnings.
			p, err := policy.CompileFile(ctx, f, opts)
			if err == nil {
				var rep *policy.TestReport
				if rep, err = p.RunTests(ctx); err == nil && len(rep.Untested) > 0 {
					err = &policy.LoadError{File: f, Problems: rep.Untested}
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return policyCancelled(err)
				}
				errs = append(errs, err)
				continue
			}
			// Uses of deprecated names still work: warnings, not errors.
			if p, err := policy.CompileFile(ctx, f, opts); err == nil {
				for _, d := range p.Deprecated() {
					fmt.Fprintf(env.stderr, "warning: %s\n", d)
				}
			}
			fmt.Fprintf(env.stdout, "ok  %s\n", f)
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
	case "replay":
		if *session == "" {
			return exitError{code: 2, msg: "policy replay needs --session ID"}
		}
		p, err := policy.CompileFile(ctx, pos[0], opts)
		if err != nil {
			return policyCancelled(err)
		}
		if err := a.openStore(true); err != nil {
			return err
		}
		sess, err := a.store.Load(ctx, *session)
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
