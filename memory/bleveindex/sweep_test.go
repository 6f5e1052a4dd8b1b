package bleveindex_test

import (
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/kernel/store/badger"
	"github.com/agentkernel/agentkernel/memory/bleveindex"
	"github.com/agentkernel/agentkernel/memory/memorytest"
)

// TestDeleteRacingIndexing: on Badger with the bleve index beside it, no
// chunk of a session deleted while it was being indexed survives the
// indexer's sweep (memorytest.DeleteRacingIndexing).
func TestDeleteRacingIndexing(t *testing.T) {
	dir := t.TempDir()
	st, err := badger.Open(filepath.Join(dir, "store"), badger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ix, err := bleveindex.Open(filepath.Join(dir, "store.memory"))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	memorytest.DeleteRacingIndexing(t, st, ix)
}
