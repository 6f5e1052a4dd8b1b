package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

func TestNotATerminalIsSilent(t *testing.T) {
	var b bytes.Buffer
	l := Start(&b, time.Nanosecond, func(time.Duration) string { return "working" })
	if l != nil {
		t.Fatal("a line for a buffer")
	}
	l.Stop() // a nil line: nothing
	if b.Len() != 0 {
		t.Fatalf("wrote %q", b.String())
	}
}

func TestLineShownThenErased(t *testing.T) {
	var b testutil.SyncBuffer
	shown := make(chan struct{})
	var once sync.Once
	l := start(&b, time.Millisecond, func(el time.Duration) string {
		once.Do(func() { close(shown) })
		return "compiling"
	})
	<-shown
	l.Stop()
	l.Stop()
	got := b.String()
	if !strings.HasPrefix(got, "\r\x1b[Kcompiling") || !strings.HasSuffix(got, "\r\x1b[K") || strings.Count(got, "compiling") != 1 {
		t.Fatalf("line output %q: want the text once (unchanged text is not redrawn), then erased", got)
	}
}

func TestQuickWorkShowsNothing(t *testing.T) {
	var b testutil.SyncBuffer
	l := start(&b, time.Hour, func(time.Duration) string { return "never" })
	l.Stop()
	if b.String() != "" {
		t.Fatalf("quick work wrote %q", b.String())
	}
}

func TestCounter(t *testing.T) {
	var c Counter
	var out bytes.Buffer
	w := c.Writer(&out)
	w.Write([]byte("hello"))
	r := c.Reader(strings.NewReader("abc"))
	buf := make([]byte, 8)
	r.Read(buf)
	if c.N() != 8 {
		t.Fatalf("counted %d, want 8", c.N())
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{1500 * time.Millisecond: "1s", 125 * time.Second: "2m05s"} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%s) = %q, want %q", d, got, want)
		}
	}
}
