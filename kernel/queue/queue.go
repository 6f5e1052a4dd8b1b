// Package queue is a kernel.Inbox kept in a directory, so that another
// process — `kernel steer` in a second terminal — can queue messages for a
// session the kernel is running, while only the kernel opens the session
// store (Badger allows one writer process).
//
// Each queued message is one file, <dir>/<session>/<id>.<state>, written
// under a temporary name and renamed into place, so a reader never sees a
// partial message. A state change is a rename, and rename is atomic: of a
// kernel claiming a message (steer → claimed) and a user cancelling it
// (steer → removed) exactly one wins. States:
//
//	<id>.steer     queued; delivered at the run's next step boundary
//	<id>.followup  queued; run as a new prompt after the current run ends
//	<id>.claimed   a steer taken by the kernel, committed to the session next
//	<id>.taken     a follow-up taken by the kernel, its prompt stored next
//
// The kernel removes a claimed or taken file once the message is in the
// session (Delivered). One left by a process that stopped in between is
// offered again, and the kernel skips it if the session already holds it
// (kernel.Inbox, kernel.Kernel.RunQueued), so a message is delivered
// exactly once.
package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/privfile"
	"github.com/agentkernel/agentkernel/kernel"
)

// Kinds of queued message.
const (
	Steer    = "steer"
	FollowUp = "followup"
	claimed  = "claimed"
	taken    = "taken"
)

// ErrNotQueued is returned by Cancel for a message that is no longer
// queued: delivered, being delivered, cancelled, or never there.
var ErrNotQueued = errors.New("not queued (already delivered or cancelled, or no such message)")

// Dir is a queue directory. It is safe for concurrent use, and by several
// processes.
type Dir struct {
	dir string
	mu  sync.Mutex
	// mine are the claims this Dir made and has not seen delivered; any
	// other claim file was left by a process that stopped.
	mine map[string]bool
}

// Entry is a queued message with its kind.
type Entry struct {
	kernel.Queued
	Kind string `json:"kind"`
}

// Open returns the queue kept in dir, creating it 0700. Queued messages
// are prompts the run trusts as the user's, so the directory is private
// (privfile.Dir): one another user owns or could write is refused, one
// others could only read is narrowed, and warn (may be nil) says so.
func Open(dir string, warn func(string)) (*Dir, error) {
	if err := privfile.Dir(dir, "the steering queue", warn); err != nil {
		return nil, fmt.Errorf("open queue: %w", err)
	}
	return &Dir{dir: dir, mine: map[string]bool{}}, nil
}

// Path is the queue's directory.
func (d *Dir) Path() string { return d.dir }

func (d *Dir) sessionDir(session string) (string, error) {
	if session == "" || session == "." || session == ".." || strings.ContainsAny(session, "/\\\x00") {
		return "", fmt.Errorf("invalid session id %q", session)
	}
	return filepath.Join(d.dir, session), nil
}

// Add queues text for session as kind (Steer or FollowUp) and returns the
// entry; its ID cancels it.
func (d *Dir) Add(_ context.Context, session, text, kind string) (Entry, error) {
	if kind != Steer && kind != FollowUp {
		return Entry{}, fmt.Errorf("unknown queue kind %q (want steer or followup)", kind)
	}
	if strings.TrimSpace(text) == "" {
		return Entry{}, errors.New("empty message")
	}
	sd, err := d.sessionDir(session)
	if err != nil {
		return Entry{}, err
	}
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return Entry{}, fmt.Errorf("queue: %w", err)
	}
	now := time.Now()
	var rnd [4]byte
	rand.Read(rnd[:])
	id := fmt.Sprintf("%020d-%s", now.UnixNano(), hex.EncodeToString(rnd[:]))
	tmp, err := os.CreateTemp(sd, ".tmp-*")
	if err != nil {
		return Entry{}, fmt.Errorf("queue: %w", err)
	}
	_, werr := tmp.WriteString(text)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), filepath.Join(sd, id+"."+kind))
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return Entry{}, fmt.Errorf("queue: %w", werr)
	}
	return Entry{Queued: kernel.Queued{ID: id, Text: text, Time: now}, Kind: kind}, nil
}

// List returns the session's queued messages (not those being delivered),
// oldest first.
func (d *Dir) List(_ context.Context, session string) ([]Entry, error) {
	files, err := d.files(session)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, f := range files {
		if f.kind == claimed || f.kind == taken {
			continue
		}
		e, err := d.read(session, f)
		if err != nil {
			continue // cancelled or taken meanwhile
		}
		out = append(out, e)
	}
	return out, nil
}

// Cancel removes a queued message before it is delivered.
func (d *Dir) Cancel(_ context.Context, session, id string) error {
	sd, err := d.sessionDir(session)
	if err != nil {
		return err
	}
	if strings.ContainsAny(id, "/\\.") {
		return fmt.Errorf("invalid message id %q", id)
	}
	for _, kind := range []string{Steer, FollowUp} {
		// Rename first: a kernel claiming it at the same time loses or wins
		// as a whole.
		p := filepath.Join(sd, id+"."+kind)
		gone := filepath.Join(sd, ".cancel-"+id)
		if err := os.Rename(p, gone); err == nil {
			return os.Remove(gone)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cancel %s: %w", id, err)
		}
	}
	return fmt.Errorf("message %s: %w", id, ErrNotQueued)
}

// Take claims the session's steering messages, oldest first, and offers
// again the claims a stopped process left (kernel.Inbox).
func (d *Dir) Take(_ context.Context, session string) ([]kernel.Queued, error) {
	files, err := d.files(session)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	sd, _ := d.sessionDir(session)
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []kernel.Queued
	for _, f := range files {
		if f.kind == FollowUp || f.kind == taken || f.kind == claimed && d.mine[f.id] {
			continue
		}
		if f.kind == Steer {
			if err := os.Rename(filepath.Join(sd, f.name), filepath.Join(sd, f.id+"."+claimed)); err != nil {
				continue // cancelled meanwhile
			}
		}
		data, err := os.ReadFile(filepath.Join(sd, f.id+"."+claimed))
		if err != nil {
			return out, fmt.Errorf("read queued message %s: %w", f.id, err)
		}
		d.mine[f.id] = true
		out = append(out, kernel.Queued{ID: f.id, Text: string(data), Time: idTime(f.id)})
	}
	return out, nil
}

// Delivered removes the claims of messages now in the session: steering
// messages and follow-ups.
func (d *Dir) Delivered(_ context.Context, session string, ids []string) error {
	sd, err := d.sessionDir(session)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, id := range ids {
		if strings.ContainsAny(id, "/\\") {
			continue
		}
		for _, state := range []string{claimed, taken} {
			if err := os.Remove(filepath.Join(sd, id+"."+state)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		delete(d.mine, id)
	}
	return errors.Join(errs...)
}

// TakeFollowUp takes the session's oldest follow-up, or nil: the caller
// runs it as a new prompt (kernel.Kernel.RunQueued). It stays in the
// directory, taken, until Delivered removes it, so a process that stops
// before its prompt is stored leaves it to be taken again; a taken one
// is offered before any queued after it.
func (d *Dir) TakeFollowUp(_ context.Context, session string) (*Entry, error) {
	files, err := d.files(session)
	if err != nil {
		return nil, err
	}
	sd, _ := d.sessionDir(session)
	for _, f := range files {
		switch f.kind {
		case FollowUp:
			if err := os.Rename(filepath.Join(sd, f.name), filepath.Join(sd, f.id+"."+taken)); err != nil {
				continue // cancelled meanwhile
			}
		case taken:
		default:
			continue
		}
		data, err := os.ReadFile(filepath.Join(sd, f.id+"."+taken))
		if err != nil {
			continue // delivered meanwhile
		}
		return &Entry{Queued: kernel.Queued{ID: f.id, Text: string(data), Time: idTime(f.id)}, Kind: FollowUp}, nil
	}
	return nil, nil
}

// Waiting lists the sessions with a follow-up queued or taken and not
// delivered, sorted.
func (d *Dir) Waiting(_ context.Context) ([]string, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("read queue: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		files, err := d.files(e.Name())
		if err != nil {
			continue
		}
		for _, f := range files {
			if f.kind == FollowUp || f.kind == taken {
				out = append(out, e.Name())
				break
			}
		}
	}
	return out, nil
}

type file struct{ name, id, kind string }

// files lists the session's queue files, oldest first.
func (d *Dir) files(session string) ([]file, error) {
	sd, err := d.sessionDir(session)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(sd)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue: %w", err)
	}
	var out []file
	for _, e := range ents {
		id, kind, ok := strings.Cut(e.Name(), ".")
		if !ok || id == "" || (kind != Steer && kind != FollowUp && kind != claimed && kind != taken) {
			continue
		}
		out = append(out, file{name: e.Name(), id: id, kind: kind})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out, nil
}

func (d *Dir) read(session string, f file) (Entry, error) {
	sd, _ := d.sessionDir(session)
	data, err := os.ReadFile(filepath.Join(sd, f.name))
	if err != nil {
		return Entry{}, err
	}
	return Entry{Queued: kernel.Queued{ID: f.id, Text: string(data), Time: idTime(f.id)}, Kind: f.kind}, nil
}

func idTime(id string) time.Time {
	ns, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

var _ kernel.Inbox = (*Dir)(nil)
