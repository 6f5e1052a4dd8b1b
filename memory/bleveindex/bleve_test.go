package bleveindex_test

import (
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/memory"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

func TestConformanceOnDisk(t *testing.T) {
	memorytest.RunIndexTests(t, func(t *testing.T) memorytest.Opener {
		dir := filepath.Join(t.TempDir(), "memory")
		return func() (memory.Index, error) { return bleveindex.Open(dir) }
	})
}
