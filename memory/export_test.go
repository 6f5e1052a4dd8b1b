package memory

import "github.com/agentkernel/agentkernel/kernel"

// ChunksForTest is the indexer's chunking of a step, for tests.
func ChunksForTest(ix *Indexer, sid string, meta *kernel.SessionMeta, msgs []kernel.Message) []Chunk {
	return ix.chunks(sid, meta, msgs)
}
