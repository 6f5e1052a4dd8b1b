-- agentkernel schema version 1: sessions, messages, events, session leases,
-- the steering queue and the runs of `kernel serve` replicas.
-- docs/sessions.md describes the tables; RATIONALE.md says why they look so.

-- One row a session: its metadata (the JSON of kernel.SessionMeta), its
-- pending approval (kernel.Approval), the seq of its last message, and its
-- lease. The lease columns are the fencing: every step write checks them
-- under the row's lock.
CREATE TABLE ak_sessions (
    id            text PRIMARY KEY,
    meta          json NOT NULL,
    pending       json,
    last_seq      bigint NOT NULL DEFAULT 0,
    status        text NOT NULL DEFAULT '',
    updated       timestamptz NOT NULL,
    lease_owner   text,
    lease_token   bigint NOT NULL DEFAULT 0,
    lease_expires timestamptz
);
CREATE INDEX ak_sessions_updated ON ak_sessions (updated DESC, id);
CREATE INDEX ak_sessions_running ON ak_sessions (id) WHERE status = 'running';

-- Messages: the JSON of kernel.Message, as bytes (any content, NUL
-- included, round-trips), keyed by the session and seq.
CREATE TABLE ak_messages (
    session_id text NOT NULL REFERENCES ak_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    body       bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- Events (kernel.EventLog): the event's JSON as bytes, numbered from 1 a
-- session. ak_event_seq holds each session's last number, so an append
-- neither scans nor locks the session's row.
CREATE TABLE ak_event_seq (
    session_id text PRIMARY KEY REFERENCES ak_sessions (id) ON DELETE CASCADE,
    last_seq   bigint NOT NULL
);
CREATE TABLE ak_events (
    session_id text NOT NULL REFERENCES ak_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    type       text NOT NULL,
    time       timestamptz NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- Steering and follow-up messages queued for a session (kernel.Inbox):
-- claimed_by names the replica that took a steering message and has not
-- yet committed it to the session.
CREATE TABLE ak_queue (
    id         text PRIMARY KEY,
    session_id text NOT NULL REFERENCES ak_sessions (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('steer', 'followup')),
    text       text NOT NULL,
    created    timestamptz NOT NULL,
    claimed_by text
);
CREATE INDEX ak_queue_session ON ak_queue (session_id, id);

-- Runs of `kernel serve` replicas: who runs what, cancel requests, and the
-- server's record of each run (JSON, opaque to the store).
CREATE TABLE ak_runs (
    id               text PRIMARY KEY,
    session_id       text NOT NULL REFERENCES ak_sessions (id) ON DELETE CASCADE,
    replica          text NOT NULL,
    status           text NOT NULL,
    cancel_requested boolean NOT NULL DEFAULT false,
    created          timestamptz NOT NULL,
    record           json NOT NULL
);
CREATE INDEX ak_runs_session ON ak_runs (session_id, created);
CREATE INDEX ak_runs_running ON ak_runs (replica) WHERE status = 'running';

-- ak_commit stores one step (kernel.Store.Commit) in one statement: lock
-- the session's row (creating it), check the fence and the seq, write the
-- messages and the row. It returns a code: ok, seq (a sequence conflict),
-- fenced (the lease token is not current or the lease expired), held
-- (an unfenced write to a session with a live lease), with the stored
-- last seq and the lease's holder, token and expiry.
CREATE FUNCTION ak_commit(p_id text, p_first bigint, p_bodies bytea[], p_meta json, p_status text,
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
    END IF;
    code := 'ok'; last := last + n;
END
$$;

-- ak_append_events appends events to a session's log (kernel.EventLog)
-- and notifies the replicas listening on ak_events ("<session> <last>").
-- It returns the first new seq, or 0 when the session does not exist.
CREATE FUNCTION ak_append_events(p_id text, p_types text[], p_times timestamptz[], p_data bytea[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n     bigint := coalesce(cardinality(p_types), 0);
    first bigint;
BEGIN
    PERFORM 1 FROM ak_sessions WHERE id = p_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    INSERT INTO ak_event_seq AS e (session_id, last_seq) VALUES (p_id, n)
    ON CONFLICT (session_id) DO UPDATE SET last_seq = e.last_seq + n
    RETURNING e.last_seq - n + 1 INTO first;
    INSERT INTO ak_events (session_id, seq, type, time, data)
    SELECT p_id, first + o - 1, t, tm, d FROM unnest(p_types, p_times, p_data) WITH ORDINALITY AS u(t, tm, d, o);
    PERFORM pg_notify('ak_events', p_id || ' ' || (first + n - 1));
    RETURN first;
END
$$;
