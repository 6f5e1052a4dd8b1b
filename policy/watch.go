package policy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agentkernel/agentkernel/kernel"
)

// WatcherConfig configures a Watcher. Path is required; the zero value of
// every other field means the documented default.
type WatcherConfig struct {
	// Path is the policy file.
	Path string
	// Options are used for every load (registered tools, decision log).
	Options Options
	// OnReload, when set, is called after every reload attempt but the
	// initial load, successful or not (see ReloadEvent.Event). It is called
	// from the watching goroutine or from Reload's caller, never
	// concurrently with itself, and must not call Reload (it would wait for
	// itself).
	OnReload func(ReloadEvent)
	// Debounce is how long the file must stay quiet after a change before it
	// is reloaded (default 150ms): editors write in several steps.
	Debounce time.Duration
}

// ReloadEvent reports one reload attempt.
type ReloadEvent struct {
	Path string
	// Trigger is "file" (the file changed) or "request" (Reload was called,
	// e.g. on SIGHUP).
	Trigger string
	// Revision and SHA256 are those of the policy in force after the
	// attempt: the new one, or the previous one when Err is set.
	Revision string
	SHA256   string
	// Err is why the new file was refused (a *LoadError, or a read error);
	// the previous policy stays in force.
	Err error
}

// Event converts the report into the kernel's config.reloaded event.
func (e ReloadEvent) Event() kernel.ConfigReloaded {
	ev := kernel.ConfigReloaded{What: "policy", Source: e.Path, Revision: e.Revision, SHA256: e.SHA256}
	if e.Err != nil {
		ev.Error = e.Err.Error()
	}
	return ev
}

// Watcher is a kernel.Policy that delegates to the current policy of a
// file and replaces it, atomically, when the file changes (Start) or when
// asked (Reload). A file that does not load — bad YAML, a compile or lint
// error, a failing test — leaves the last good policy in force. Decisions
// in flight during a swap finish under the policy they started with. A
// Watcher is safe for concurrent use.
//
// Lifecycle:
//
//  1. NewWatcher loads the file; it fails if the file does not load.
//  2. Start watches the file's directory (so editors that replace the file
//     by renaming a new one over it are seen) until Close.
//  3. Reload reloads on demand (the CLI calls it on SIGHUP).
//  4. Close stops watching and waits for the watching goroutine to exit.
type Watcher struct {
	cfg WatcherConfig
	cur atomic.Pointer[Policy]

	mu      sync.Mutex // serialises reloads and OnReload calls
	lastSHA string     // of the bytes of the last attempt, good or bad
	lifeMu  sync.Mutex
	fw      *fsnotify.Watcher
	stop    chan struct{}
	cancel  context.CancelFunc // cancels a reload in progress in loop
	wg      sync.WaitGroup
	started bool
}

// ErrWatcherClosed is returned by Start after Close.
var ErrWatcherClosed = errors.New("policy watcher closed")

// NewWatcher loads cfg.Path and returns a Watcher serving it. The initial
// load is cancellable: when ctx is done it returns ctx's error (see Load).
// ctx is not kept; reloads from Start are cancelled by Close, and Reload
// takes its own.
func NewWatcher(ctx context.Context, cfg WatcherConfig) (*Watcher, error) {
	if cfg.Path == "" {
		return nil, errors.New("policy watcher: WatcherConfig.Path is required")
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 150 * time.Millisecond
	}
	p, err := LoadFile(ctx, cfg.Path, cfg.Options)
	if err != nil {
		return nil, err
	}
	w := &Watcher{cfg: cfg, lastSHA: p.sha}
	w.cur.Store(p)
	return w, nil
}

// Policy returns the policy in force.
func (w *Watcher) Policy() *Policy { return w.cur.Load() }

// Surface delegates to the policy in force.
func (w *Watcher) Surface(ctx context.Context, st *kernel.State, tools []kernel.ToolSpec) []kernel.ToolSpec {
	return w.cur.Load().Surface(ctx, st, tools)
}

// Decide delegates to the policy in force.
func (w *Watcher) Decide(ctx context.Context, st *kernel.State, c *kernel.Call) kernel.Decision {
	return w.cur.Load().Decide(ctx, st, c)
}

// RecordApproval delegates to the policy in force
// (kernel.ApprovalRecorder).
func (w *Watcher) RecordApproval(st *kernel.State, a *kernel.Approval, rec kernel.ApprovalRecord) {
	w.cur.Load().RecordApproval(st, a, rec)
}

// Budget delegates to the policy in force.
func (w *Watcher) Budget(ctx context.Context, st *kernel.State, phase kernel.BudgetPhase) kernel.BudgetVerdict {
	return w.cur.Load().Budget(ctx, st, phase)
}

// Reload loads the file now and swaps it in when it loads. It returns the
// load error (the previous policy then stays in force) and reports the
// attempt to OnReload either way. It is abandoned with ctx's error when
// ctx is done (the previous policy stays in force).
func (w *Watcher) Reload(ctx context.Context) error {
	return w.reload(ctx, "request", false)
}

func (w *Watcher) reload(ctx context.Context, trigger string, onlyIfChanged bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	src, err := readFile(w.cfg.Path)
	if err == nil {
		sum := sha256Hex(src)
		if onlyIfChanged && sum == w.lastSHA {
			return nil
		}
		prev := w.lastSHA
		w.lastSHA = sum
		var p *Policy
		if p, err = Load(ctx, w.cfg.Path, src, w.cfg.Options); err == nil {
			w.cur.Store(p)
		} else if ctx.Err() != nil {
			w.lastSHA = prev // not tried to the end: a later change retries it
		}
	}
	cur := w.cur.Load()
	if w.cfg.OnReload != nil {
		w.cfg.OnReload(ReloadEvent{Path: w.cfg.Path, Trigger: trigger, Revision: cur.revision, SHA256: cur.sha, Err: err})
	}
	return err
}

// Start begins watching the file. Changes are reloaded after the file has
// been quiet for the debounce interval, and only when its content differs
// from the last version tried (so restoring the good file after a broken
// one is reported too).
func (w *Watcher) Start() error {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	if w.started {
		if w.stop == nil {
			return ErrWatcherClosed
		}
		return nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch policy %s: %w", w.cfg.Path, err)
	}
	dir := filepath.Dir(w.cfg.Path)
	if err := fw.Add(dir); err != nil {
		fw.Close()
		return fmt.Errorf("watch policy directory %s: %w", dir, err)
	}
	w.fw, w.stop, w.started = fw, make(chan struct{}), true
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Add(1)
	go w.loop(ctx, fw, w.stop)
	return nil
}

// Close stops watching and waits for the watching goroutine. It is safe
// to call more than once; the Watcher keeps serving its current policy.
func (w *Watcher) Close() error {
	w.lifeMu.Lock()
	defer w.lifeMu.Unlock()
	if w.stop == nil {
		w.started = true // a later Start fails
		return nil
	}
	w.cancel() // a reload in progress stops now, not after the whole file
	close(w.stop)
	w.wg.Wait()
	w.stop = nil
	return w.fw.Close()
}

// loop reacts to any event in the directory: editors replace files by
// rename, and Kubernetes swaps a symlinked directory, so the event's name
// is not a reliable filter. The file is re-read after the debounce and
// reloaded only when its bytes changed.
func (w *Watcher) loop(ctx context.Context, fw *fsnotify.Watcher, stop <-chan struct{}) {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case _, ok := <-fw.Events:
			if !ok {
				return
			}
			timer.Reset(w.cfg.Debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			w.report(fmt.Errorf("watch policy %s: %w", w.cfg.Path, err))
		case <-timer.C:
			_ = w.reload(ctx, "file", true) // reported through OnReload
		}
	}
}

func (w *Watcher) report(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.OnReload != nil {
		cur := w.cur.Load()
		w.cfg.OnReload(ReloadEvent{Path: w.cfg.Path, Trigger: "file", Revision: cur.revision, SHA256: cur.sha, Err: err})
	}
}

var (
	_ kernel.Policy           = (*Watcher)(nil)
	_ kernel.ApprovalRecorder = (*Watcher)(nil)
)
