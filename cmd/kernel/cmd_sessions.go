package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/progress"
	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/store/badger"
)

const sessionsUsage = `Usage: kernel sessions SUBCOMMAND [flags]

  ls [--json]             list sessions: id, updated, status, turns, cost, title
  show ID [--full|--json] a readable transcript (tool results folded unless --full);
                          --context prints what the model sees next (after compaction)
  compact ID              summarise the session's older history now (docs/context.md)
  export ID [-o FILE]     the session as JSONL (schemas/session-export.schema.json)
  import FILE             add an exported session (- reads stdin)
  rm ID...                delete sessions
  gc --older-than AGE     delete sessions not updated for AGE (30d, 12h, 90m)
  fsck [--repair] [ID...] check every stored value's checksum, per session;
                          --repair stores placeholders for lost messages

Flags: --config FILE, --store DIR`

func cmdSessions(ctx context.Context, args []string, env *cliEnv) error {
	sub, args, fs, cf, ok := subcommand("sessions", sessionsUsage, args, env)
	if !ok {
		return nil
	}
	full := fs.Bool("full", false, "show: print tool results and arguments in full")
	showContext := fs.Bool("context", false, "show: print the messages of the next request, as compacted")
	out := fs.String("o", "", "export: write to `FILE` instead of stdout")
	olderThan := fs.String("older-than", "", "gc: delete sessions not updated for this `AGE` (e.g. 30d)")
	asJSON := fs.Bool("json", false, "ls, show: print JSON instead of text")
	repair := fs.Bool("repair", false, "fsck: replace damaged messages with placeholders for good")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	need := func(n int, what string) error {
		if len(pos) < n {
			return exitError{code: 2, msg: "sessions " + sub + " needs " + what}
		}
		return nil
	}
	switch sub {
	case "show", "export", "compact":
		err = need(1, "a session id")
	case "import":
		err = need(1, "a file (- for stdin)")
	case "rm":
		err = need(1, "one or more session ids")
	case "gc":
		if *olderThan == "" {
			err = exitError{code: 2, msg: "sessions gc needs --older-than AGE (e.g. 30d)"}
		}
	case "ls", "fsck":
	default:
		fmt.Fprintln(env.stderr, sessionsUsage)
		err = exitError{code: 2, msg: fmt.Sprintf("unknown sessions subcommand %q", sub)}
	}
	if err != nil {
		return err
	}
	if sub == "compact" {
		return compactSession(ctx, cf, env, pos[0])
	}
	a := &app{cfg: cfg}
	a.log = newLogger(env.stderr)
	readOnly := sub == "ls" || sub == "show" || sub == "export"
	if err := a.openStore(readOnly); err != nil {
		return err
	}
	defer a.Close()
	switch sub {
	case "ls":
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
	case "show":
		s, err := a.store.Load(ctx, pos[0])
		if err != nil {
			return err
		}
		_ = a.Close() // let go of the store before printing (a pager may wait)
		if *showContext {
			return writeContext(env.stdout, s, cfg.SystemPrompt, *full)
		}
		if *asJSON {
			return writeJSON(env, sessionJSON(s))
		}
		writeTranscript(env.stdout, s, *full)
		return nil
	case "export":
		bs, ok := a.store.(*badger.Store)
		if !ok {
			return errors.New("export needs the badger store")
		}
		var buf bytes.Buffer
		var moved progress.Counter
		stop := statusLine(env.stderr, "exporting session "+pos[0], &moved)
		err := bs.Export(ctx, pos[0], moved.Writer(&buf))
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
	case "import":
		bs, ok := a.store.(*badger.Store)
		if !ok {
			return errors.New("import needs the badger store")
		}
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
		id, err := bs.Import(ctx, moved.Reader(r))
		stop()
		if err != nil {
			return fmt.Errorf("import %s: %w", pos[0], err)
		}
		fmt.Fprintln(env.stdout, id)
		return nil
	case "rm":
		d, ok := a.store.(kernel.SessionDeleter)
		if !ok {
			return errors.New("this store cannot delete sessions")
		}
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
	case "gc":
		age, err := badger.ParseAge(*olderThan)
		if err != nil {
			return fmt.Errorf("--older-than: %w", err)
		}
		bs, ok := a.store.(*badger.Store)
		if !ok {
			return errors.New("gc needs the badger store")
		}
		stop := statusLine(env.stderr, "removing the sessions not updated for "+*olderThan, nil)
		removed, err := bs.GC(ctx, age)
		stop()
		for _, id := range removed {
			fmt.Fprintln(env.stdout, "removed", id)
		}
		if err == nil {
			fmt.Fprintf(env.stderr, "%d sessions older than %s removed\n", len(removed), *olderThan)
			reclaimSpace(ctx, env, a.store)
		}
		return err
	case "fsck":
		bs, ok := a.store.(*badger.Store)
		if !ok {
			return errors.New("fsck needs the badger store")
		}
		return runFsck(ctx, env, bs, pos, *repair)
	}
	return fmt.Errorf("sessions %s: not implemented", sub)
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
			fmt.Fprintf(w, "[%d] %s\n%s\n\n", msg.Seq, who, indent(msg.Content))
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
			for _, c := range msg.ToolCalls {
				fmt.Fprintf(w, "    → %s\n%s", c.Name, formatArgs(json.RawMessage(c.Arguments), "        "))
			}
			fmt.Fprintln(w)
		case kernel.RoleTool:
			mark := "✓"
			if msg.IsError {
				mark = "✗"
			}
			if full {
				fmt.Fprintf(w, "[%d] %s %s\n%s\n\n", msg.Seq, mark, msg.ToolName, indent(msg.Content))
			} else {
				fmt.Fprintf(w, "[%d] %s %s · %s · %s\n", msg.Seq, mark, msg.ToolName, fmtBytes(len(msg.Content)), clip(msg.Content, 70))
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
		fmt.Fprintf(w, "\nwaiting for approval:\n%s\n  approve: %s    reject: %s\n", indent(describeApproval(p, &m)),
			resumeHint("approve", m.ID, storeHint(store)), resumeHint("reject", m.ID, storeHint(store)))
	}
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
