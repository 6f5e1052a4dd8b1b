package subprocess

import (
	"bytes"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// maxLogLine caps one logged line of a plugin's output.
const maxLogLine = 4 << 10

// lineLogger is an io.Writer that logs each line written to it at Info,
// with a "stream" field. go-plugin hands it what the plugin writes to
// os.Stdout and os.Stderr after the handshake. Safe for concurrent use.
type lineLogger struct {
	log    hclog.Logger
	stream string
	mu     sync.Mutex
	buf    []byte
}

func newLineLogger(log hclog.Logger, stream string) *lineLogger {
	return &lineLogger{log: log, stream: stream}
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
}

func (l *lineLogger) emit(line []byte) {
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	l.log.Info(string(bytes.TrimRight(line, "\r")), "stream", l.stream)
}
