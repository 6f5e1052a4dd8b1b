-- agentkernel schema version 2: events are fenced like steps.
-- ak_append_events takes the appender's lease token (kernel.EventLog, as
-- Step.Fence for ak_commit): a replica that lost the session's lease
-- appends no event more. RATIONALE.md, "Events are fenced like steps".

DROP FUNCTION ak_append_events(text, text[], timestamptz[], bytea[]);

-- ak_append_events appends events to a session's log and notifies the
-- replicas listening on ak_events ("<session> <last>"). It returns a code
-- and the first new seq: ok; missing (no such session); fenced (p_fence
-- is not the token of the session's live lease); held (no token, and
-- another owner holds a live lease). Nothing is appended unless ok.
--
-- The counter row's lock orders the appends of a session, and the lease
-- is read only once the lock is held: an append that passes the check
-- lands before any append of a later owner, which needs the same lock
-- and can exist only once the takeover committed. The session's row is
-- only key-shared, so appends never wait for a step being written.
CREATE FUNCTION ak_append_events(p_id text, p_fence bigint, p_types text[], p_times timestamptz[], p_data bytea[],
                                 OUT code text, OUT first bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n       bigint := coalesce(cardinality(p_types), 0);
    cur     bigint;
    holder  text;
    token   bigint;
    expires timestamptz;
    live    boolean;
BEGIN
    first := 0;
    PERFORM 1 FROM ak_sessions WHERE id = p_id FOR KEY SHARE;
    IF NOT FOUND THEN
        code := 'missing'; RETURN;
    END IF;
    INSERT INTO ak_event_seq (session_id, last_seq) VALUES (p_id, 0) ON CONFLICT (session_id) DO NOTHING;
    SELECT e.last_seq INTO cur FROM ak_event_seq e WHERE e.session_id = p_id FOR UPDATE;
    SELECT s.lease_owner, s.lease_token, s.lease_expires INTO holder, token, expires FROM ak_sessions s WHERE s.id = p_id;
    live := holder IS NOT NULL AND expires > now();
    IF p_fence <> 0 AND (token <> p_fence OR NOT live) THEN
        code := 'fenced'; RETURN;
    END IF;
    IF p_fence = 0 AND live THEN
        code := 'held'; RETURN;
    END IF;
    UPDATE ak_event_seq SET last_seq = cur + n WHERE session_id = p_id;
    INSERT INTO ak_events (session_id, seq, type, time, data)
    SELECT p_id, cur + o, t, tm, d FROM unnest(p_types, p_times, p_data) WITH ORDINALITY AS u(t, tm, d, o);
    PERFORM pg_notify('ak_events', p_id || ' ' || (cur + n));
    code := 'ok'; first := cur + 1;
END
$$;
