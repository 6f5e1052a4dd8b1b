package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/progress"
	"github.com/agentkernel/agentkernel/kernel"
)

// sessionsGroup is `kernel sessions`: a table of subcommands, each with its own
// flags (group.go).
var sessionsGroup = group{
	name:   "sessions",
	footer: "Flags: --config FILE, --store DIR",
	subs: []subcmd{
		{name: "ls", synopsis: "[--json]", summary: "list sessions: id, updated, status, turns, cost, title", flags: sessionsLs},
		{name: "show", synopsis: "ID [--full|--json]", summary: "a readable transcript (tool results folded unless --full);\n--context prints what the model sees next (after compaction)",
			args: "ID", need: 1, needs: "a session id", flags: sessionsShow},
		{name: "compact", synopsis: "ID", summary: "summarise the session's older history now (docs/context.md)",
			args: "ID", need: 1, needs: "a session id", flags: noFlags(sessionsCompact)},
		{name: "export", synopsis: "ID [-o FILE]", summary: "the session as JSONL (schemas/session-export.schema.json)",
			args: "ID", need: 1, needs: "a session id", flags: sessionsExport},
		{name: "import", synopsis: "FILE", summary: "add an exported session (- reads stdin)",
			args: "FILE", need: 1, needs: "a file (- for stdin)", flags: noFlags(sessionsImport)},
		{name: "rm", synopsis: "ID...", summary: "delete sessions", args: "ID...", need: 1, needs: "one or more session ids", flags: noFlags(sessionsRm)},
		{name: "gc", synopsis: "--older-than AGE", summary: "delete sessions not updated for AGE (30d, 12h, 90m)", flags: sessionsGC},
		{name: "fsck", synopsis: "[--repair] [ID...]", summary: "check every stored value and the pairing of calls and\nresults, per session; --repair stores placeholders for lost messages",
			args: "[ID...]", flags: sessionsFsck},
	},
}

// openSessions loads the configuration and opens its store, read-only
// when asked, for a sessions subcommand; close the app when done.
func openSessions(cf *commonFlags, env *cliEnv, readOnly bool) (*app, error) {
	cfg, err := cf.load()
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, log: newLogger(env.stderr)}
	if err := a.openStore(readOnly); err != nil {
		return nil, err
	}
	return a, nil
}

// openCapability opens the store as openSessions does and returns it as
// the optional capability T (kernel/store.go), or an error saying that
// this store cannot do what; close the app when done.
func openCapability[T any](cf *commonFlags, env *cliEnv, readOnly bool, what string) (*app, T, error) {
	var c T
	a, err := openSessions(cf, env, readOnly)
	if err != nil {
		return nil, c, err
	}
	c, ok := a.store.(T)
	if !ok {
		a.Close()
		return nil, c, fmt.Errorf("this store cannot %s", what)
	}
	return a, c, nil
}

func sessionsLs(fs *flag.FlagSet) subRun {
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
		a, err := openSessions(cf, env, true)
		if err != nil {
			return err
		}
		defer a.Close()
		list, err := a.store.List(ctx)
		if err != nil {
			return err
		}
		_ = a.Close() // let go of the store before printing (a pager may wait)
		if *asJSON {
			return writeJSON(env, sessionList(list))
		}
		if len(list) == 0 {
			fmt.Fprintln(env.stderr, "no sessions yet")
			return nil
		}
		writeSessionTable(env.stdout, list, "")
		return nil
	}
}

func sessionsShow(fs *flag.FlagSet) subRun {
	full := fs.Bool("full", false, "print tool results and arguments in full")
	showContext := fs.Bool("context", false, "print the messages of the next request, as compacted")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		a, err := openSessions(cf, env, true)
		if err != nil {
			return err
		}
		defer a.Close()
		s, err := a.store.Load(ctx, pos[0])
		if err != nil {
			return err
		}
		_ = a.Close() // let go of the store before printing (a pager may wait)
		if *showContext {
			tok, err := a.contextTokenizer()
			if err != nil {
				return err
			}
			return writeContext(env.stdout, s, a.cfg.SystemPrompt, *full, tok)
		}
		if *asJSON {
			return writeJSON(env, sessionJSON(s))
		}
		writeTranscript(env.stdout, s, *full)
		return nil
	}
}

func sessionsCompact(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
	return compactSession(ctx, cf, env, pos[0])
}

func sessionsExport(fs *flag.FlagSet) subRun {
	out := fs.String("o", "", "write to `FILE` instead of stdout")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		a, ex, err := openCapability[kernel.SessionExporter](cf, env, true, "export sessions")
		if err != nil {
			return err
		}
		defer a.Close()
		var buf bytes.Buffer
		var moved progress.Counter
		stop := statusLine(env.stderr, "exporting session "+pos[0], &moved)
		err = ex.Export(ctx, pos[0], moved.Writer(&buf))
		stop()
		if err != nil {
			return err
		}
		_ = a.Close() // let go of the store before writing
		if *out == "" {
			_, err := env.stdout.Write(buf.Bytes())
			return err
		}
		return writePrivateFile(*out, buf.Bytes())
	}
}

func sessionsImport(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
	a, im, err := openCapability[kernel.SessionImporter](cf, env, false, "import sessions")
	if err != nil {
		return err
	}
	defer a.Close()
	var r io.Reader = env.stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	var moved progress.Counter
	stop := statusLine(env.stderr, "importing "+pos[0], &moved)
	id, err := im.Import(ctx, moved.Reader(r))
	stop()
	if err != nil {
		return fmt.Errorf("import %s: %w", pos[0], err)
	}
	fmt.Fprintln(env.stdout, id)
	return nil
}

func sessionsRm(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
	a, d, err := openCapability[kernel.SessionDeleter](cf, env, false, "delete sessions")
	if err != nil {
		return err
	}
	defer a.Close()
	var errs []error
	for _, id := range pos {
		if err := d.Delete(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintln(env.stdout, "removed", id)
	}
	reclaimSpace(ctx, env, a.store)
	return errors.Join(errs...)
}

func sessionsGC(fs *flag.FlagSet) subRun {
	olderThan := fs.String("older-than", "", "delete sessions not updated for this `AGE` (e.g. 30d)")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, _ []string) error {
		if *olderThan == "" {
			return usageError("sessions gc needs --older-than AGE (e.g. 30d)")
		}
		age, err := parseAge(*olderThan)
		if err != nil {
			return fmt.Errorf("--older-than: %w", err)
		}
		a, gc, err := openCapability[kernel.SessionCollector](cf, env, false, "collect old sessions")
		if err != nil {
			return err
		}
		defer a.Close()
		stop := statusLine(env.stderr, "removing the sessions not updated for "+*olderThan, nil)
		removed, err := gc.GC(ctx, age)
		stop()
		for _, id := range removed {
			fmt.Fprintln(env.stdout, "removed", id)
		}
		if err == nil {
			fmt.Fprintf(env.stderr, "%d sessions older than %s removed\n", len(removed), *olderThan)
			reclaimSpace(ctx, env, a.store)
		}
		return err
	}
}

func sessionsFsck(fs *flag.FlagSet) subRun {
	repair := fs.Bool("repair", false, "replace damaged messages with placeholders for good")
	return func(ctx context.Context, cf *commonFlags, env *cliEnv, pos []string) error {
		a, c, err := openCapability[kernel.StoreChecker](cf, env, false, "check its sessions")
		if err != nil {
			return err
		}
		defer a.Close()
		return runFsck(ctx, env, c, pos, *repair)
	}
}

// writeTranscript prints a session for a person: each message numbered,
// tool results folded to one line unless full.
func writeTranscript(w io.Writer, s *kernel.Session, full bool) {
	m := s.Meta
	fmt.Fprintf(w, "session %s · %q · %s · model %s\n", m.ID, m.Title, m.Status, m.Model)
	fmt.Fprintf(w, "created %s · updated %s · %s · %s · %d in / %d out tokens · $%.4f\n\n",
		m.Created.Local().Format(time.DateTime), m.Updated.Local().Format(time.DateTime), counted(m.Runs, "run"), counted(m.Turns, "turn"),
		m.Usage.InputTokens, m.Usage.OutputTokens, m.CostUSD)
	for _, msg := range s.Messages {
		switch msg.Role {
		case kernel.RoleUser:
			who := "user"
			if k := msg.CorrectionKind(); k != "" {
				who = "kernel correction (" + k + ")"
			}
			if n := hookNote(&msg, kernel.PointRunEnd, kernel.NoteContinued); n != nil {
				who = "hook " + n.Hook + " (run_end): not done yet"
			}
			fmt.Fprintf(w, "[%d] %s\n%s\n%s\n", msg.Seq, who, indent(msg.Content), hookLines(&msg))
		case kernel.RoleSystem:
			if msg.Hooks != nil && len(msg.Hooks.Notes) > 0 {
				n := msg.Hooks.Notes[0]
				fmt.Fprintf(w, "[%d] context from hook %s (%s)\n%s\n\n", msg.Seq, n.Hook, n.Point, indent(msg.Content))
			}
		case kernel.RoleAssistant:
			text := msg.Content
			if raw := msg.RawText(); raw != "" && len(msg.ToolCalls) == 0 && raw != msg.Content {
				// A text-protocol answer that broke the rules: as written.
				fmt.Fprintf(w, "[%d] assistant (broke the tool protocol; nothing ran)\n", msg.Seq)
				text = raw
			} else {
				fmt.Fprintf(w, "[%d] assistant\n", msg.Seq)
			}
			if text != "" {
				fmt.Fprintln(w, indent(text))
			}
			if msg.Failed != "" {
				fmt.Fprintln(w, indent("(no answer: "+msg.Failed+")"))
			}
			for _, c := range msg.ToolCalls {
				fmt.Fprintf(w, "    → %s\n%s", c.Name, formatArgs(json.RawMessage(c.Arguments), "        ", nil))
			}
			fmt.Fprintln(w, hookLines(&msg))
		case kernel.RoleTool:
			mark := "✓"
			if msg.IsError {
				mark = "✗"
			}
			if full {
				fmt.Fprintf(w, "[%d] %s %s\n%s\n", msg.Seq, mark, msg.ToolName, indent(msg.Content))
			} else {
				fmt.Fprintf(w, "[%d] %s %s · %s · %s\n", msg.Seq, mark, msg.ToolName, fmtBytes(len(msg.Content)), clip(msg.Content, 70))
			}
			if msg.Approval != nil {
				fmt.Fprintf(w, "    %s\n", approvalLine(msg.Approval))
			}
			if full {
				fmt.Fprintln(w)
			}
		case kernel.RoleCompaction:
			writeCompaction(w, &msg, full)
		}
	}
	if s.Pending != nil {
		p := s.Pending
		store := ""
		if m.Context != nil {
			store = m.Context.Store
		}
		fmt.Fprintf(w, "\nwaiting for approval:\n%s\n  approve: %s    reject: %s\n", indent(describeApproval(context.Background(), p, &m, nil)),
			resumeHint("approve", m.ID, storeHint(store)), resumeHint("reject", m.ID, storeHint(store)))
	}
}

// approvalLine says how a call that waited for a human was decided: by
// whom, with their note.
func approvalLine(a *kernel.ApprovalRecord) string {
	verb := "rejected"
	switch {
	case a.Expired:
		verb = "not decided in time (approval expired)"
	case a.Approved:
		verb = "approved"
	}
	s := verb
	if a.By != "" {
		s += " by " + a.By
	}
	// A rejection's note is recorded as the reason the model read
	// ("rejected: NOTE", "approval expired"): show the person's words.
	note := a.Note
	if !a.Approved {
		for _, p := range []string{"approval expired", "rejected"} {
			if rest, ok := strings.CutPrefix(note, p); ok && (rest == "" || strings.HasPrefix(rest, ": ")) {
				note = strings.TrimPrefix(rest, ": ")
				break
			}
		}
	}
	if note != "" {
		s += ": " + strconv.Quote(note)
	}
	return s
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// hookNote is m's note of what at point, or nil.
func hookNote(m *kernel.Message, point kernel.HookPoint, what string) *kernel.HookNote {
	if m.Hooks == nil {
		return nil
	}
	for i, n := range m.Hooks.Notes {
		if n.Point == point && n.What == what {
			return &m.Hooks.Notes[i]
		}
	}
	return nil
}

// hookLines says, under a message, what lifecycle hooks did there (""
// when none did).
func hookLines(m *kernel.Message) string {
	if m.Hooks == nil {
		return ""
	}
	var b strings.Builder
	for _, n := range m.Hooks.Notes {
		fmt.Fprintf(&b, "    · hook %s (%s) %s", n.Hook, n.Point, n.What)
		if n.Reason != "" {
			fmt.Fprintf(&b, ": %s", clip(n.Reason, 100))
		}
		b.WriteByte('\n')
	}
	for _, e := range m.Hooks.Edits {
		fmt.Fprintf(&b, "    · hook %s edited message %d in the requests from here on\n", e.Hook, e.Seq)
	}
	return b.String()
}
