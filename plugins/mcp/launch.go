package mcp

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// command builds the process of a stdio server. It is the only place this
// package creates a process: the sandbox launcher (cfg.Grant) takes over
// here. The process gets only the allowlisted environment, runs in cfg.Dir,
// in its own process group (killed as a whole when the kernel stops it),
// and its stderr goes to the log, a line at a time, with the last lines
// kept for crash reports.
func command(ctx context.Context, cfg ServerConfig, stderr *stderrLog) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, cfg.Command[0], cfg.Command[1:]...)
	cmd.Dir = cfg.Dir
	cmd.Env = allowedEnv(cfg.Env)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 2 * time.Second
	return cmd, nil
}

// allowedEnv is the kernel's environment cut down to names.
func allowedEnv(names []string) []string {
	env := make([]string, 0, len(names))
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}

// killGroup kills the process group of a started command.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}

// maxLogLine caps one logged line of a server's stderr; tailBytes is how
// much of its end a crash report quotes.
const (
	maxLogLine = 4 << 10
	tailBytes  = 2 << 10
)

// stderrLog logs what a server writes to stderr, a line at a time, and
// keeps the tail for crash reports. Safe for concurrent use.
type stderrLog struct {
	log  hclog.Logger
	mu   sync.Mutex
	buf  []byte
	tail []byte
}

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail = append(l.tail, p...)
	if len(l.tail) > tailBytes {
		l.tail = append(l.tail[:0], l.tail[len(l.tail)-tailBytes:]...)
	}
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				l.log.Info(string(l.buf[:maxLogLine]), "stream", "stderr")
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		line := bytes.TrimRight(l.buf[:min(i, maxLogLine)], "\r")
		if len(line) > 0 {
			l.log.Info(string(line), "stream", "stderr")
		}
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
}

// lastLines returns the kept tail of stderr, trimmed.
func (l *stderrLog) lastLines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(bytes.TrimSpace(l.tail))
}
