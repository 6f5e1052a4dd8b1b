-- agentkernel schema version 3: memory's chunks (docs/memory.md,
-- "PostgreSQL"). One row a chunk of a committed message's scrubbed text,
-- with its provenance and scope columns, its full-text vector and, when
-- an embeddings endpoint is configured, its embedding.
--
-- Full text: PostgreSQL's own search, a generated tsvector (the english
-- configuration: stemming, stop words) plus the chunk's CJK characters one
-- by one (the default parser would keep a run of ideographs as one word,
-- so a CJK query would find nothing), under a GIN index.
--
-- Vectors: Debian's PostgreSQL 15 has no pgvector, so an embedding is
-- bytea (little-endian float32s) and a search scans the scope's vectors
-- exactly (RATIONALE.md, "Memory on PostgreSQL: tsvector, and vectors
-- without pgvector").
--
-- No foreign key to ak_sessions: chunks are indexed after the step
-- commits, off the loop; the trigger below removes a deleted session's
-- chunks (kernel sessions rm, the TTL sweep, kernel store gc).
-- ak_memory_cjk keeps a text's CJK characters (kana, ideographs, hangul),
-- each as a word of its own.
CREATE FUNCTION ak_memory_cjk(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT regexp_replace(
        regexp_replace(t, '[^\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+', ' ', 'g'),
        '(\S)', ' \1 ', 'g')
$$;

-- ak_memory_query turns a prompt into a tsquery: any of its lexemes
-- (english, stemmed) or CJK characters, ranked by ts_rank. A prompt is not
-- a boolean query: every word need not match.
CREATE FUNCTION ak_memory_query(q text) RETURNS tsquery LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT array_to_string(array(
        SELECT '''' || replace(replace(l, '\', '\\'), '''', '''''') || ''''
        FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, q) ||
                                      to_tsvector('simple'::regconfig, ak_memory_cjk(q)))) AS l), ' | ')::tsquery
$$;

CREATE TABLE ak_memory_chunks (
    id         text PRIMARY KEY,
    session_id text NOT NULL,
    owner      text NOT NULL,
    workspace  text NOT NULL,
    seq        bigint NOT NULL,
    part       integer NOT NULL,
    role       text NOT NULL,
    tool       text NOT NULL,
    time       timestamptz NOT NULL,
    body       text NOT NULL,
    vector     bytea,
    tsv        tsvector GENERATED ALWAYS AS (
                   to_tsvector('english'::regconfig, body) ||
                   to_tsvector('simple'::regconfig, ak_memory_cjk(body))) STORED
);
CREATE INDEX ak_memory_chunks_tsv ON ak_memory_chunks USING gin (tsv);
CREATE INDEX ak_memory_chunks_session ON ak_memory_chunks (session_id, seq, part);
CREATE INDEX ak_memory_chunks_owner ON ak_memory_chunks (owner, workspace);
CREATE INDEX ak_memory_chunks_pending ON ak_memory_chunks (time, id) WHERE vector IS NULL;

-- Each session's mark: the seq up to which its messages are indexed
-- (memory.Index.Mark), written in the transaction that adds the chunks.
CREATE TABLE ak_memory_marks (
    session_id text PRIMARY KEY,
    seq        bigint NOT NULL
);

-- The dimension of the stored vectors (0 before the first): one row, whose
-- lock orders the writers of vectors, so two dimensions never mix.
CREATE TABLE ak_memory_meta (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    dims integer NOT NULL
);
INSERT INTO ak_memory_meta (dims) VALUES (0);

-- A deleted session's chunks and mark go with it (kernel sessions rm, the
-- TTL sweep, kernel store gc), in the deleting transaction.
CREATE FUNCTION ak_memory_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ak_memory_chunks WHERE session_id = OLD.id;
    DELETE FROM ak_memory_marks WHERE session_id = OLD.id;
    RETURN NULL;
END $$;
CREATE TRIGGER ak_memory_forget AFTER DELETE ON ak_sessions
    FOR EACH ROW EXECUTE FUNCTION ak_memory_forget();
