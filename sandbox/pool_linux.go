package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Pre-started launchers. Most of a confined start is the launcher's own:
// exec, Go runtime start, namespaces, mounts, Landlock. None of it depends
// on the program, so a launcher can do all of it before the call and wait,
// confined, for the program's argv, environment, directory and stdio on a
// socket (goMsg). Each launcher runs one program and exits: the program
// still gets a fresh PID namespace, /tmp and mount table. Why, and what it
// costs: RATIONALE.md, "Pre-started sandbox launchers".

// maxGoMsg bounds a goMsg, as the spec pipe bounds a cold start's spec.
const maxGoMsg = 60 << 10

// DefaultPrestart is how many confined launchers are kept ready per grant
// once a Prestarted Cmd has used that grant.
const DefaultPrestart = 1

// refillDelay is how long after a command ends its grant's next launcher
// is started: not while the caller is still busy with the result (a fork
// of the kernel holds its memory map for a moment).
const refillDelay = 5 * time.Millisecond

// prestartIdle is how long a ready launcher waits for a program before it
// is discarded.
const prestartIdle = 5 * time.Minute

func thePrestartN() int {
	thePool.mu.Lock()
	defer thePool.mu.Unlock()
	return thePool.n
}

// SetPrestart sets how many launchers are kept ready per grant for
// Prestarted commands; 0 turns pre-starting off (every start is cold) and
// discards the ready ones.
func SetPrestart(n int) {
	thePool.mu.Lock()
	thePool.n = max(n, 0)
	thePool.mu.Unlock()
	if n <= 0 {
		ClosePrestarted()
	}
}

// ClosePrestarted discards every ready launcher (they exit without running
// anything). Commands started later pre-start new ones.
func ClosePrestarted() {
	thePool.mu.Lock()
	var all []*warm
	for k, ws := range thePool.ready {
		all = append(all, ws...)
		delete(thePool.ready, k)
	}
	thePool.mu.Unlock()
	for _, w := range all {
		if w.claim() { // not if a Cmd or watch has it already
			w.discard()
		}
	}
}

// PrestartStats counts what pre-starting did in this process.
type PrestartStats struct {
	Ready  int // launchers waiting now
	Hits   int // starts that took a ready launcher
	Misses int // starts that found none and started one themselves
	Stale  int // ready launchers discarded because a granted path changed
}

// Prestarted reports the pool's counters.
func Prestarted() PrestartStats {
	thePool.mu.Lock()
	defer thePool.mu.Unlock()
	s := thePool.stats
	for _, ws := range thePool.ready {
		s.Ready += len(ws)
	}
	return s
}

// WarmUp makes sure a launcher for g is ready (confined and waiting) and
// waits until it is, or ctx is done: call it at start-up for a grant whose
// first command should not pay a cold start.
func WarmUp(ctx context.Context, g Grant) error {
	sp, netns, rep, err := buildSpec(g, []string{"-"})
	if err != nil {
		return err
	}
	sp.Argv = nil
	key, err := poolKey(sp, netns)
	if err != nil {
		return err
	}
	for {
		thePool.mu.Lock()
		n, starting := thePool.n, thePool.starting[key]
		var w *warm
		if ws := thePool.ready[key]; len(ws) > 0 {
			w = ws[0]
		}
		thePool.mu.Unlock()
		switch {
		case n == 0:
			return nil
		case w == nil && starting > 0:
			// One is being started (a refill): it joins the ready list
			// within a fork's time.
			select {
			case <-time.After(time.Millisecond):
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		case w == nil:
			if w = thePool.refill(key, sp, netns, rep, true); w == nil {
				return nil
			}
		}
		select {
		case <-w.ready:
			return nil
		case <-w.dead:
			return errors.New("sandbox: the pre-started launcher exited before it was ready")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// warm is one pre-started launcher.
type warm struct {
	cmd     *exec.Cmd
	cgroups *sandboxCgroups // its cgroups, if any
	status  *os.File        // the outcome, read by the Cmd that takes it
	ctl     *os.File        // the host's end of the go socket
	fp      fingerprint
	ready   chan struct{} // closed when the launcher said it is confined
	dead    chan struct{} // closed when it exited before being taken

	mu    sync.Mutex
	taken bool
	idle  *time.Timer
}

// fingerprint is the (device, inode) of every granted path when the
// launcher was started: Landlock rules and bind mounts hold the inodes
// they were made on, so a launcher whose paths were replaced since would
// confine the program to the old ones.
type fingerprint []uint64

func takeFingerprint(sp *spec) fingerprint {
	fp := make(fingerprint, 0, 2*len(sp.Rules))
	for _, r := range sp.Rules {
		fp = append(fp, r.dev, r.ino)
	}
	return fp
}

func (a fingerprint) equal(b fingerprint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type pool struct {
	mu       sync.Mutex
	n        int
	ready    map[string][]*warm
	starting map[string]int
	stats    PrestartStats
	spawn    chan func()
}

var thePool = &pool{n: DefaultPrestart, ready: map[string][]*warm{}, starting: map[string]int{}}

// poolKey is what two starts must share to use the same launcher: the
// whole spec but the program, and the launcher binary.
func poolKey(sp spec, netns bool) (string, error) {
	sp.Argv, sp.TimeoutNS, sp.Prestarted = nil, 0, true
	b, err := json.Marshal(struct {
		Spec     spec
		NetNS    bool
		Launcher string
	}{sp, netns, currentLauncher().path})
	return string(b), err
}

// onSpawner runs start on the pool's own OS thread. A parent-death signal
// fires when the thread that forked the child exits; this thread never
// does, so a ready launcher dies with the kernel and not before.
func (p *pool) onSpawner(start func()) {
	p.mu.Lock()
	if p.spawn == nil {
		p.spawn = make(chan func())
		go func(reqs chan func()) {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range reqs {
				f()
			}
		}(p.spawn)
	}
	ch := p.spawn
	p.mu.Unlock()
	done := make(chan struct{})
	ch <- func() { start(); close(done) }
	<-done
}

// take returns a ready launcher for key whose paths are unchanged, or nil.
func (p *pool) take(key string, fp fingerprint) *warm {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ws := p.ready[key]; len(ws) > 0; ws = p.ready[key] {
		w := ws[0]
		p.ready[key] = ws[1:]
		if !w.claim() {
			continue // it died or idled out meanwhile
		}
		if !w.fp.equal(fp) {
			p.stats.Stale++
			go w.discard()
			continue
		}
		p.stats.Hits++
		return w
	}
	p.stats.Misses++
	return nil
}

// refill starts launchers for key until n are ready or starting. It
// returns one of them when wantOne (for WarmUp).
func (p *pool) refill(key string, sp spec, netns bool, rep Report, wantOne bool) *warm {
	p.mu.Lock()
	missing := p.n - len(p.ready[key]) - p.starting[key]
	var have *warm
	if wantOne && len(p.ready[key]) > 0 {
		have = p.ready[key][0]
	}
	if missing <= 0 {
		p.mu.Unlock()
		return have
	}
	p.starting[key] += missing
	p.mu.Unlock()
	startOne := func() *warm {
		w, err := startWarm(sp, netns, rep)
		p.mu.Lock()
		p.starting[key]--
		off := p.n == 0 // pre-starting was turned off meanwhile
		if err == nil && !off {
			p.ready[key] = append(p.ready[key], w)
			w.mu.Lock()
			w.idle = time.AfterFunc(prestartIdle, func() { p.drop(key, w) })
			w.mu.Unlock()
		}
		p.mu.Unlock()
		if err == nil && off {
			w.discard()
			return nil
		}
		return w
	}
	if wantOne && have == nil {
		have = startOne()
		missing--
	}
	for range missing {
		go startOne()
	}
	return have
}

// drop removes w from the ready list and discards it.
func (p *pool) drop(key string, w *warm) {
	p.mu.Lock()
	ws := p.ready[key]
	for i, x := range ws {
		if x == w {
			p.ready[key] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	if w.claim() {
		w.discard()
	}
}

// startWarm starts a launcher for sp (without a program) on the pool's
// thread.
func startWarm(sp spec, netns bool, rep Report) (*warm, error) {
	sp.Argv, sp.TimeoutNS, sp.Prestarted = nil, 0, true
	fp := takeFingerprint(&sp)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: go socket: %w", err)
	}
	host, child := os.NewFile(uintptr(fds[0]), "sandbox-go"), os.NewFile(uintptr(fds[1]), "sandbox-go")
	c, err := newCmd(context.Background(), sp, netns, rep)
	if err != nil {
		host.Close()
		child.Close()
		return nil, err
	}
	c.ExtraFiles = append(c.ExtraFiles, child)
	c.childEnds = append(c.childEnds, child)
	c.Thread = func(fork func() error) error { return fork() } // already on the spawner's thread
	thePool.onSpawner(func() { err = c.Start() })
	if err != nil {
		host.Close()
		return nil, err
	}
	w := &warm{cmd: c.Cmd, cgroups: c.cgroups, status: c.status, ctl: host, fp: fp, ready: make(chan struct{}), dead: make(chan struct{})}
	go w.watch()
	return w, nil
}

// watch waits for the launcher's ready byte. A launcher that exits first
// (it could not confine itself) is reaped here unless a Cmd took it, which
// then reports why.
func (w *warm) watch() {
	var b [1]byte
	n, _ := w.ctl.Read(b[:])
	if n == 1 && b[0] == readyByte {
		close(w.ready)
		return
	}
	if w.claim() {
		w.discard()
	}
	close(w.dead)
}

// claim marks w taken; false when someone else (a Cmd, the idle timer,
// watch) already has it.
func (w *warm) claim() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.taken {
		return false
	}
	w.taken = true
	if w.idle != nil {
		w.idle.Stop()
	}
	return true
}

// discard ends an unused launcher: closing its socket makes it exit, the
// kill makes sure.
func (w *warm) discard() {
	w.ctl.Close()
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
	_ = w.cmd.Wait()
	w.cgroups.remove()
	w.status.Close()
}

// startPrestarted is Start for a Prestarted Cmd: it hands the program to
// a ready launcher for the same grant (or one started now) and starts the
// next one for the call after.
func (c *Cmd) startPrestarted() error {
	key, err := poolKey(c.sp, c.netns)
	if err != nil {
		return err
	}
	w := thePool.take(key, takeFingerprint(&c.sp))
	c.poolKey = key
	if w == nil {
		if w, err = startWarm(c.sp, c.netns, c.rep); err != nil {
			return err
		}
		w.claim()
	}
	orig := c.Cmd
	if err := c.sendGo(w, orig); err != nil {
		w.discard()
		return err
	}
	c.Cmd, c.status, c.waitDelay, c.cgroups = w.cmd, w.status, orig.WaitDelay, w.cgroups
	w.ctl.Close()
	if c.ctx.Done() != nil {
		pid := c.Process.Pid
		c.stopCancel = context.AfterFunc(c.ctx, func() { _ = unix.Kill(-pid, unix.SIGKILL) })
	}
	return nil
}

// sendGo gives the launcher the program: argv, environment and directory
// as JSON, stdin, stdout and stderr as descriptors (pipes with copying
// goroutines for what is not an *os.File, as os/exec does).
func (c *Cmd) sendGo(w *warm, orig *exec.Cmd) error {
	b, err := json.Marshal(goMsg{Argv: c.sp.Argv, Env: orig.Env, Dir: orig.Dir, TimeoutNS: c.sp.TimeoutNS})
	if err != nil {
		return err
	}
	if len(b) > maxGoMsg {
		return errors.New("sandbox: the program's argv and environment are too large")
	}
	var childFiles []*os.File
	defer func() {
		for _, f := range childFiles {
			f.Close()
		}
	}()
	var stdio [3]*os.File
	in, err := c.stdinFile(orig.Stdin, &childFiles)
	if err != nil {
		return err
	}
	stdio[0] = in
	if stdio[1], err = c.outFile(orig.Stdout, &childFiles); err != nil {
		return err
	}
	if orig.Stderr != nil && orig.Stderr == orig.Stdout {
		stdio[2] = stdio[1]
	} else if stdio[2], err = c.outFile(orig.Stderr, &childFiles); err != nil {
		return err
	}
	rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	// Through the raw conn, not Fd(): Fd would make the socket blocking
	// under watch's pending Read, which Close could then not end.
	rc, err := w.ctl.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), b, rights, nil, 0)
		return serr != unix.EAGAIN
	}); err != nil {
		serr = err
	}
	if serr != nil {
		return fmt.Errorf("sandbox: hand the program to the launcher: %w", serr)
	}
	return nil
}

func (c *Cmd) stdinFile(r io.Reader, child *[]*os.File) (*os.File, error) {
	switch r := r.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		*child = append(*child, f)
		return f, err
	case *os.File:
		return r, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	*child = append(*child, pr)
	c.copying.Add(1)
	go func() {
		defer c.copying.Done()
		_, _ = io.Copy(pw, r)
		pw.Close()
	}()
	return pr, nil
}

func (c *Cmd) outFile(wr io.Writer, child *[]*os.File) (*os.File, error) {
	switch wr := wr.(type) {
	case nil:
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		*child = append(*child, f)
		return f, err
	case *os.File:
		return wr, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	*child = append(*child, pw)
	c.copying.Add(1)
	c.readEnds = append(c.readEnds, pr)
	go func() {
		defer c.copying.Done()
		_, _ = io.Copy(wr, pr)
	}()
	return pw, nil
}

// waitCopies waits for the stdio copies after the launcher exited. Every
// process of the sandbox died with it, so the pipes close; WaitDelay
// bounds the wait as os/exec's does.
func (c *Cmd) waitCopies() error {
	done := make(chan struct{})
	go func() { c.copying.Wait(); close(done) }()
	var err error
	if c.waitDelay > 0 {
		t := time.NewTimer(c.waitDelay)
		select {
		case <-done:
		case <-t.C:
			err = exec.ErrWaitDelay
			for _, f := range c.readEnds {
				f.Close()
			}
			<-done
		}
		t.Stop()
	} else {
		<-done
	}
	for _, f := range c.readEnds {
		f.Close()
	}
	return err
}

// waitPrestarted is Wait for a Prestarted Cmd. It returns on the
// launcher's report, which it sends once the program and everything it
// started are dead and their stdio closed; the launcher's own exit (the
// namespaces' teardown) is reaped in the background. Then the next
// launcher for the grant is started, after the call rather than during
// it, where it would compete with the program for the CPU.
func (c *Cmd) waitPrestarted() error {
	c.readOutcome()
	if c.outcome.Known {
		go func() {
			_ = c.Cmd.Wait()
			c.cgroups.remove()
		}()
	} else {
		_ = c.Cmd.Wait() // killed from outside: nothing reported
		c.cgroups.remove()
	}
	copyErr := c.waitCopies()
	c.collect()
	time.AfterFunc(refillDelay, func() { thePool.refill(c.poolKey, c.sp, c.netns, c.rep, false) })
	o := c.outcome
	countLimit(o.Limit)
	switch {
	case o.Limit != nil:
		return o.Limit
	case o.Err != "":
		return fmt.Errorf("sandbox: %s", o.Err)
	case !o.Known:
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("sandbox: killed: %w", context.Cause(c.ctx))
		}
		return errors.New("sandbox: the launcher was killed before it reported how the program ended")
	case !o.Exited || o.ExitCode != 0:
		return &ExitError{Outcome: o}
	}
	return copyErr
}

// readOutcome blocks until the launcher reports (one write, smaller than
// a pipe's atomic size) or exits without reporting.
func (c *Cmd) readOutcome() {
	buf := make([]byte, 8192)
	n, _ := c.status.Read(buf)
	if n > 0 && json.Unmarshal(buf[:n], &c.outcome) == nil {
		c.outcome.Known = true
	}
	c.collected = true
	if c.stopCancel != nil {
		c.stopCancel()
	}
	c.status.Close()
}

// ExitError is Wait's error for a Prestarted program that exited with a
// non-zero status or was killed by a signal.
type ExitError struct{ Outcome Outcome }

func (e *ExitError) Error() string {
	if e.Outcome.Signal != "" {
		return "signal: " + e.Outcome.Signal
	}
	return fmt.Sprintf("exit status %d", e.Outcome.ExitCode)
}

// ExitCode is the program's exit status, or -1 when a signal ended it.
func (e *ExitError) ExitCode() int {
	if !e.Outcome.Exited {
		return -1
	}
	return e.Outcome.ExitCode
}
