-- agentkernel schema version 4: memory's full-text index keeps a short
-- pending list (docs/memory.md, "Performance"; RATIONALE.md, "Memory on
-- PostgreSQL: common lexemes rank, rare lexemes select").
--
-- A GIN index with fastupdate (PostgreSQL's default) keeps new entries in
-- a pending list, up to gin_pending_list_limit (4 MB by default), until a
-- vacuum or the limit merges them: every search reads that list whole,
-- and the planner, counting it, preferred reading every chunk to using
-- the index (10k chunks just written: a sequential scan, 35 ms, where the
-- index takes 1 ms). 256 kB keeps the batched merge (chunks are written
-- off the loop, a batch at a time) and bounds what a search reads.
ALTER INDEX ak_memory_chunks_tsv SET (gin_pending_list_limit = 256);

-- Entries already pending are merged now (a smaller limit does not merge
-- them until the next insert passes it).
SELECT gin_clean_pending_list('ak_memory_chunks_tsv'::regclass);
