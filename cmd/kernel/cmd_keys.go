package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/agentkernel/agentkernel/serve"
)

// keysGroup is `kernel keys`: kernel serve's API keys.
var keysGroup = group{
	name: "keys",
	footer: `Keys are for kernel serve (docs/serve.md). The key file keeps only their
SHA-256; the secret is printed once, by create. Flags: --keys FILE (default
beside the session store), --config FILE, --store DIR`,
	subs: []subcmd{
		{name: "create", synopsis: "NAME --scopes SCOPES [--tenant T]", summary: "make a key and print its secret once",
			args: "NAME", need: 1, needs: "a NAME for the key", flags: keysCreate},
		{name: "list", summary: "names, scopes, tenants, state", flags: keysList},
		{name: "revoke", synopsis: "NAME|ID", summary: "refuse the key from now on",
			args: "NAME|ID", need: 1, needs: "the NAME or ID of a key", flags: keysRevoke},
	},
}

// keysFile registers --keys and returns the function that opens the key
// file it names (or the default, beside the configuration's store).
func keysFile(fs *flag.FlagSet) func(cf *commonFlags, env *cliEnv) (*serve.KeyStore, string, error) {
	file := fs.String("keys", "", "API key `FILE` (default: beside the session store)")
	return func(cf *commonFlags, env *cliEnv) (*serve.KeyStore, string, error) {
		cfg, err := cf.load()
		if err != nil {
			return nil, "", err
		}
		path, err := cfg.keysPath(*file)
		if err != nil {
			return nil, "", err
		}
		// A key file others could read is narrowed, and the user told.
		ks, err := serve.OpenKeys(path, func(msg string) { fmt.Fprintf(env.stderr, "kernel keys: warning: %s\n", msg) })
		return ks, path, err
	}
}

func keysCreate(fs *flag.FlagSet) subRun {
	open := keysFile(fs)
	scopes := fs.String("scopes", "", "comma-separated `SCOPES`: "+scopeHelp())
	tenant := fs.String("tenant", "", "the `TENANT` that owns the key's sessions (keys of one tenant share them)")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		if len(pos) != 1 {
			return usageError("keys create takes one NAME, got %d arguments", len(pos))
		}
		if *scopes == "" {
			return usageError("keys create needs --scopes (comma-separated: %s)", strings.Join(serve.AllScopes, ", "))
		}
		ks, path, err := open(cf, env)
		if err != nil {
			return err
		}
		k, secret, err := ks.Create(pos[0], *tenant, strings.Split(*scopes, ","))
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "created key %s (id %s, scopes %s) in %s\nthe secret is shown once; keep it somewhere safe:\n", k.Name, k.ID, strings.Join(k.Scopes, ","), path)
		fmt.Fprintln(env.stdout, secret)
		return nil
	}
}

// scopeHelp is the scopes for --scopes' help, from serve's list.
func scopeHelp() string {
	return strings.Join(serve.AllScopes, ", ")
}

func keysList(fs *flag.FlagSet) subRun {
	open := keysFile(fs)
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
		ks, _, err := open(cf, env)
		if err != nil {
			return err
		}
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
	}
}

func keysRevoke(fs *flag.FlagSet) subRun {
	open := keysFile(fs)
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		if len(pos) != 1 {
			return usageError("keys revoke takes one NAME or ID, got %d arguments", len(pos))
		}
		ks, _, err := open(cf, env)
		if err != nil {
			return err
		}
		k, err := ks.Revoke(pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "revoked key %s (id %s); a running server refuses it within a second\n", k.Name, k.ID)
		return nil
	}
}
