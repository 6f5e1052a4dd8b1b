// Package progress shows that long work goes on: one status line on a
// terminal, redrawn in place, that appears only once the work has taken
// a while and disappears when it ends. Where the output is not a terminal
// (a script, a pipe, a file, a test) nothing is written at all.
//
// The kernel's commands use it for what can take more than two seconds: a
// WASM module's first compilation, `sessions gc`, `import` and `export` of
// a large store, a policy's tests.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// DefaultAfter is how long work runs before its line shows: quick work
// shows nothing.
const DefaultAfter = 2 * time.Second

// tick is how often a shown line is redrawn (its text is asked again).
const tick = 250 * time.Millisecond

// Line is one status line. Its methods may be called on a nil *Line (a
// line for a writer that is not a terminal): they do nothing. It is safe
// for concurrent use.
type Line struct {
	w     io.Writer
	text  func(elapsed time.Duration) string
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// Start starts a status line on w, shown after after has passed (zero
// means DefaultAfter) and redrawn with text(elapsed) until Stop. It returns
// nil when w is not a terminal.
func Start(w io.Writer, after time.Duration, text func(elapsed time.Duration) string) *Line {
	if !IsTerminal(w) {
		return nil
	}
	return start(w, after, text)
}

func start(w io.Writer, after time.Duration, text func(time.Duration) string) *Line {
	if after <= 0 {
		after = DefaultAfter
	}
	l := &Line{w: w, text: text, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(after) // owned by the Line: Stop waits for it
	return l
}

func (l *Line) run(after time.Duration) {
	defer close(l.done)
	wait := time.NewTimer(after)
	defer wait.Stop()
	select {
	case <-l.stop:
		return
	case <-wait.C:
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	last := ""
	for {
		if s := l.text(time.Since(l.start)); s != last {
			fmt.Fprint(l.w, "\r\x1b[K"+s)
			last = s
		}
		select {
		case <-l.stop:
			fmt.Fprint(l.w, "\r\x1b[K")
			return
		case <-t.C:
		}
	}
}

// Stop ends the line: it is erased if it was shown. Stop returns once
// nothing more will be written; calling it again does nothing.
func (l *Line) Stop() {
	if l == nil {
		return
	}
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// Seconds formats an elapsed time for a status line: "12s", "2m05s".
func Seconds(d time.Duration) string {
	s := int(d.Seconds())
	if s < 60 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Counter counts what a reader or writer moves, for a line's text.
type Counter struct {
	mu sync.Mutex
	n  int64
}

// Add adds n.
func (c *Counter) Add(n int) {
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
}

// N is the count so far.
func (c *Counter) N() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Reader counts what r reads into c.
func (c *Counter) Reader(r io.Reader) io.Reader { return countReader{r, c} }

// Writer counts what is written to w into c.
func (c *Counter) Writer(w io.Writer) io.Writer { return countWriter{w, c} }

type countReader struct {
	r io.Reader
	c *Counter
}

func (r countReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.c.Add(n)
	return n, err
}

type countWriter struct {
	w io.Writer
	c *Counter
}

func (w countWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.c.Add(n)
	return n, err
}
