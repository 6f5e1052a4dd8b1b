// Package testutil holds small helpers the kernel's own tests share.
package testutil

import (
	"bytes"
	"sync"
)

// SyncBuffer is a log sink for tests: an hclog logger, a process's stderr
// or any other writer on several goroutines may write to it while the
// test reads it. Safe for concurrent use; the zero value is empty.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Len is the number of bytes written so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}
