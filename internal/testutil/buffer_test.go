package testutil_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/testutil"
)

// TestSyncBufferConcurrent writes from many goroutines while reading; under
// -race it fails if SyncBuffer's lock is removed, and every write must be
// kept whole.
func TestSyncBufferConcurrent(t *testing.T) {
	var b testutil.SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 800 || b.Len() != 800*5 {
		t.Fatalf("%d lines, %d bytes", got, b.Len())
	}
}
