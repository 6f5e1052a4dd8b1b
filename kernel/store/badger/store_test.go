package badger

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/agentkernel/agentkernel/kernel"
	"github.com/agentkernel/agentkernel/kernel/kerneltest"
)

// openTest opens a store in a fresh directory, closed at the end of t.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	return openAt(t, t.TempDir(), opts)
}

func openAt(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "store", Level: hclog.Warn, Output: hclog.DefaultOutput})
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	kerneltest.TestStore(t, func(t *testing.T) kernel.Store { return openTest(t, Options{}) })
}

func quietLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "store", Level: hclog.Warn, Output: hclog.DefaultOutput})
}
