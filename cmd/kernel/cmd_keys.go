package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/agentkernel/agentkernel/serve"
)

const keysUsage = `Usage: kernel keys create NAME --scopes run,read,approve [--tenant T]   print a new key once
       kernel keys list                                              names, scopes, state
       kernel keys revoke NAME|ID                                    refuse the key from now on

Keys are for kernel serve (docs/serve.md). The key file keeps only their
SHA-256; the secret is printed once, by create. Scopes: run (sessions and
runs), read (sessions, events, tools, policy), approve (decide approvals),
admin (all of them). Flags: --keys FILE (default beside the session
store), --config FILE, --store DIR`

// cmdKeys manages kernel serve's API keys.
func cmdKeys(ctx context.Context, args []string, env *cliEnv) error {
	sub, args, fs, cf, ok := subcommand("keys", keysUsage, args, env)
	if !ok {
		return nil
	}
	keysFlag := fs.String("keys", "", "API key `FILE` (default: beside the session store)")
	scopes := fs.String("scopes", "", "create: comma-separated `SCOPES` (run, read, approve, admin)")
	tenant := fs.String("tenant", "", "create: the `TENANT` that owns the key's sessions (keys of one tenant share them)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	path, err := cfg.keysPath(*keysFlag)
	if err != nil {
		return err
	}
	ks, err := serve.OpenKeys(path, func(msg string) { fmt.Fprintf(env.stderr, "kernel keys: warning: %s\n", msg) })
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		if len(pos) != 1 {
			return exitError{code: 2, msg: "keys create needs exactly one NAME"}
		}
		if *scopes == "" {
			return exitError{code: 2, msg: "keys create needs --scopes (run, read, approve, admin; comma-separated)"}
		}
		k, secret, err := ks.Create(pos[0], *tenant, strings.Split(*scopes, ","))
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "created key %s (id %s, scopes %s) in %s\nthe secret is shown once; keep it somewhere safe:\n", k.Name, k.ID, strings.Join(k.Scopes, ","), path)
		fmt.Fprintln(env.stdout, secret)
		return nil
	case "list":
		list, err := ks.List()
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tSCOPES\tTENANT\tCREATED\tSTATE")
		for _, k := range list {
			state := "active"
			if !k.Active() {
				state = "revoked " + k.Revoked.Format("2006-01-02 15:04")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.Name, k.ID, strings.Join(k.Scopes, ","), orDash(k.Tenant), k.Created.Format("2006-01-02 15:04"), state)
		}
		return tw.Flush()
	case "revoke":
		if len(pos) != 1 {
			return exitError{code: 2, msg: "keys revoke needs exactly one NAME or ID"}
		}
		k, err := ks.Revoke(pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "revoked key %s (id %s); a running server refuses it within a second\n", k.Name, k.ID)
		return nil
	}
	fmt.Fprintln(env.stderr, keysUsage)
	return exitError{code: 2, msg: fmt.Sprintf("unknown keys subcommand %q", sub)}
}
