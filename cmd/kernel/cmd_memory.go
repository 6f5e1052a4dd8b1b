package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/memory"
)

// memoryGroup is `kernel memory` (docs/memory.md).
var memoryGroup = group{
	name: "memory",
	footer: `search ranks the indexed messages of the store's sessions by the query: full
text, fused with vectors when memory.embeddings is set. --session ID searches
one session, --owner NAME every session of a kernel serve key's owner; without
either, every session run from the command line. Before it searches, the
index catches up with the store.

status prints what the index holds and how far it is behind the store.
reindex drops every session's chunks and indexes the store again.
Flags: --config FILE, --store DIR`,
	subs: []subcmd{
		{name: "search", synopsis: "QUERY [--session ID|--owner NAME] [-k N]", summary: "search memory", args: "QUERY", need: 1, needs: "a query", flags: memorySearchCmd},
		{name: "status", summary: "what the memory index holds and its backlog", flags: noFlags(memoryStatusCmd)},
		{name: "reindex", summary: "index every session of the store again", flags: noFlags(memoryReindexCmd)},
	},
}

// memoryApp opens the store and the memory index for a memory command.
func memoryApp(cf *commonFlags, env *cliEnv) (*app, *memorySetup, error) {
	cfg, err := cf.load()
	if err != nil {
		return nil, nil, err
	}
	return (&app{cfg: cfg, log: newLogger(env.stderr)}).openStoreMemory()
}

// openStoreMemory opens the store and the memory index; on an error the
// app is closed.
func (a *app) openStoreMemory() (*app, *memorySetup, error) {
	if err := a.openStore(false); err != nil {
		a.Close()
		return nil, nil, err
	}
	m, err := a.openMemory()
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, m, nil
}

// memoryIndexApp is memoryApp for a command that indexes (reindex): the
// whole app first (tools, hooks, policy), so the policy's exclude rules
// apply to what it indexes as they do in a run (docs/memory.md, "Policy").
func memoryIndexApp(ctx context.Context, cf *commonFlags, env *cliEnv) (*app, *memorySetup, error) {
	a, err := loadApp(ctx, cf, env, false)
	if err != nil {
		return nil, nil, err
	}
	return a.openStoreMemory()
}

func memorySearchCmd(fs *flag.FlagSet) subRun {
	session := fs.String("session", "", "search the session `ID` only")
	owner := fs.String("owner", "", "search every session of the owner `NAME` (a kernel serve key's owner)")
	k := fs.Int("k", 8, "how many hits to print")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		if *session != "" && *owner != "" {
			return usageError("memory search takes --session or --owner, not both")
		}
		a, m, err := memoryApp(cf, env)
		if err != nil {
			return err
		}
		defer a.Close()
		if err := m.indexer.CatchUp(ctx); err != nil {
			return fmt.Errorf("memory: catch up with the store: %w", err)
		}
		s := memory.Scope{Kind: memory.ScopeOwner, Owner: *owner}
		if *session != "" {
			s = memory.Scope{Kind: memory.ScopeSession, SessionID: *session}
			if sess, err := a.store.Load(ctx, *session); err == nil {
				s.Owner = sess.Meta.Labels[memory.OwnerLabel]
			} else {
				return err
			}
		}
		hits, err := m.retriever.Search(ctx, s, strings.Join(pos, " "), *k)
		if err != nil {
			return err
		}
		if len(hits) == 0 {
			fmt.Fprintln(env.stderr, "no match")
			return nil
		}
		for _, h := range hits {
			c := h.Chunk
			text := strings.Join(strings.Fields(c.Text), " ")
			if r := []rune(text); len(r) > 160 {
				text = string(r[:160]) + "…"
			}
			who := c.Role
			if c.Tool != "" {
				who += " " + c.Tool
			}
			fmt.Fprintf(env.stdout, "%d. %.4f %s  session %s message %d, %s, %s\n   %s\n", h.Rank, h.Score, h.Source, c.SessionID, c.Seq, who, c.Time.UTC().Format("2006-01-02 15:04 UTC"), text)
		}
		return nil
	}
}

func memoryStatusCmd(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
	if len(pos) > 0 {
		return usageError("memory status takes no arguments (got %q)", pos[0])
	}
	a, m, err := memoryApp(cf, env)
	if err != nil {
		return err
	}
	defer a.Close()
	st, err := m.index.Status(ctx)
	if err != nil {
		return err
	}
	metas, err := a.store.List(ctx)
	if err != nil {
		return err
	}
	var behind, sessions uint64
	for _, meta := range metas {
		mark, err := m.index.Mark(ctx, meta.ID)
		if err != nil {
			return err
		}
		if mark < meta.LastSeq {
			behind += meta.LastSeq - mark
			sessions++
		}
	}
	fmt.Fprintf(env.stdout, "index:      %s (%s)\n", st.Backend, m.where)
	fmt.Fprintf(env.stdout, "chunks:     %d in %d sessions\n", st.Chunks, st.Sessions)
	if m.retriever.Embedder != nil {
		fmt.Fprintf(env.stdout, "vectors:    %d of %d dimensions (%d chunks wait for one)\n", st.Vectors, st.Dimensions, st.Chunks-st.Vectors)
	} else {
		fmt.Fprintln(env.stdout, "vectors:    none (full text only: memory.embeddings is not set)")
	}
	if st.Bytes >= 0 {
		fmt.Fprintf(env.stdout, "size:       %s\n", fmtBytes(int(st.Bytes)))
	}
	fmt.Fprintf(env.stdout, "backlog:    %d messages in %d sessions not indexed yet\n", behind, sessions)
	if st.Detail != "" && st.Detail != m.where {
		fmt.Fprintf(env.stdout, "note:       %s\n", st.Detail)
	}
	return nil
}

func memoryReindexCmd(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
	if len(pos) > 0 {
		return usageError("memory reindex takes no arguments (got %q)", pos[0])
	}
	a, m, err := memoryIndexApp(ctx, cf, env)
	if err != nil {
		return err
	}
	defer a.Close()
	metas, err := a.store.List(ctx)
	if err != nil {
		return err
	}
	for _, meta := range metas {
		if err := m.index.DeleteSession(ctx, meta.ID); err != nil {
			return err
		}
	}
	if err := m.indexer.CatchUp(ctx); err != nil {
		return err
	}
	if m.retriever.Embedder != nil {
		for {
			n, err := m.indexer.EmbedPending(ctx)
			if err != nil {
				return fmt.Errorf("memory: embeddings: %w (the chunks are indexed for full text; run reindex again when the server answers)", err)
			}
			if n == 0 {
				break
			}
		}
	}
	st, err := m.index.Status(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "reindexed %d sessions: %d chunks, %d vectors\n", len(metas), st.Chunks, st.Vectors)
	return nil
}
