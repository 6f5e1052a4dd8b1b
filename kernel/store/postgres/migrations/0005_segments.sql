-- agentkernel schema version 5: a session's messages are also kept packed,
-- 256 to a row, so that a resume reads tens of rows, not thousands
-- (docs/sessions.md, "Message segments"; RATIONALE.md, "PostgreSQL resume:
-- packed segments beside the message rows (issue 45)").
--
-- ak_messages stays the source of truth: every writer writes it as before,
-- fsck, export and the commit's read-back read it. A segment is a copy of
-- the rows first_seq..last_seq (a whole chunk of 256: first_seq = 256k+1,
-- last_seq = 256(k+1)), made by the server from rows already in the same
-- transaction, in one statement: each message as the 4-byte big-endian
-- length of its row's body, then the body. Segments are written only in
-- the transaction that stores the chunk's last message (ak_commit, an
-- import), so a segment exists only beside the rows it copies, and the
-- segments of a session are chunks 0..k, without a gap unless a row is
-- missing. Load reads the segments, then the rows past the last one; a
-- segment it cannot read makes it read the rows. fsck's repair, which
-- rewrites rows, deletes the session's segments in its transaction.
CREATE TABLE ak_segments (
    session_id text NOT NULL REFERENCES ak_sessions (id) ON DELETE CASCADE,
    first_seq  bigint NOT NULL,
    last_seq   bigint NOT NULL,
    body       bytea NOT NULL,
    PRIMARY KEY (session_id, first_seq)
);
-- The bodies are msgcodec values already: not compressed again (pglz's
-- decompression would be paid on every load).
ALTER TABLE ak_segments ALTER COLUMN body SET STORAGE EXTERNAL;

-- ak_pack writes the segments of session p_id's whole chunks up to seq
-- p_last that it has none of yet, from its rows. A chunk with a row
-- missing (a damaged database) is not packed.
CREATE FUNCTION ak_pack(p_id text, p_last bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    packed bigint;
    upto   bigint := p_last - p_last % 256;
BEGIN
    SELECT coalesce(max(g.last_seq), 0) INTO packed FROM ak_segments g WHERE g.session_id = p_id;
    IF upto <= packed THEN
        RETURN;
    END IF;
    INSERT INTO ak_segments (session_id, first_seq, last_seq, body)
    SELECT p_id, min(m.seq), max(m.seq), string_agg(int4send(length(m.body)) || m.body, ''::bytea ORDER BY m.seq)
      FROM ak_messages m
     WHERE m.session_id = p_id AND m.seq > packed AND m.seq <= upto
     GROUP BY (m.seq - 1) / 256
    HAVING count(*) = 256
        ON CONFLICT (session_id, first_seq) DO NOTHING;
END
$$;

-- ak_commit as in version 1, and it packs the chunks its step completes.
CREATE OR REPLACE FUNCTION ak_commit(p_id text, p_first bigint, p_bodies bytea[], p_meta json, p_status text,
                          p_updated timestamptz, p_pending json, p_clear boolean, p_fence bigint,
                          OUT code text, OUT last bigint, OUT holder text, OUT token bigint, OUT expires timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    n    bigint := coalesce(cardinality(p_bodies), 0);
    live boolean;
BEGIN
    LOOP
        SELECT s.last_seq, s.lease_owner, s.lease_token, s.lease_expires
          INTO last, holder, token, expires
          FROM ak_sessions s WHERE s.id = p_id FOR NO KEY UPDATE;
        EXIT WHEN FOUND;
        -- A new session.
        IF p_fence <> 0 THEN
            code := 'fenced'; last := 0; token := 0; RETURN;
        END IF;
        IF n > 0 AND p_first <> 1 THEN
            code := 'seq'; last := 0; token := 0; RETURN;
        END IF;
        INSERT INTO ak_sessions (id, meta, pending, last_seq, status, updated)
        VALUES (p_id, p_meta, p_pending, n, p_status, p_updated)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            IF n > 0 THEN
                INSERT INTO ak_messages (session_id, seq, body)
                SELECT p_id, o, b FROM unnest(p_bodies) WITH ORDINALITY AS t(b, o);
            END IF;
            IF n >= 256 THEN
                PERFORM ak_pack(p_id, n);
            END IF;
            code := 'ok'; last := n; token := 0; RETURN;
        END IF;
        -- Another writer created it meanwhile: lock it and check as usual.
    END LOOP;
    live := holder IS NOT NULL AND expires > now();
    IF p_fence <> 0 AND (token <> p_fence OR NOT live) THEN
        code := 'fenced'; RETURN;
    END IF;
    IF p_fence = 0 AND live THEN
        code := 'held'; RETURN;
    END IF;
    IF n > 0 AND p_first <> last + 1 THEN
        code := 'seq'; RETURN;
    END IF;
    UPDATE ak_sessions SET meta = p_meta, last_seq = last + n, status = p_status, updated = p_updated,
        pending = CASE WHEN p_pending IS NOT NULL THEN p_pending WHEN p_clear THEN NULL ELSE pending END
    WHERE id = p_id;
    IF n > 0 THEN
        INSERT INTO ak_messages (session_id, seq, body)
        SELECT p_id, last + o, b FROM unnest(p_bodies) WITH ORDINALITY AS t(b, o);
        IF (last + n) / 256 > last / 256 THEN
            PERFORM ak_pack(p_id, last + n);
        END IF;
    END IF;
    code := 'ok'; last := last + n;
END
$$;
