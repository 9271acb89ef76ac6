-- agentmaild's PostgreSQL schema, version 6 (PostgreSQL only): the plain send as one call.
-- am_send_one is the common send (one message, no idempotency key, no rate limit, no thread
-- guard) in one statement: the same locks, checks and writes, in the same order, as the store's
-- general send (postgres_messages._insert). It writes only when every check passes; on anything
-- the general send would answer otherwise (a repeat inside the window, a refused recipient, a
-- full inbox) it writes nothing and returns 'slow', and the caller runs the general send.
CREATE OR REPLACE FUNCTION am_send_one(
  p_locks text[], p_check text, p_refused text[], p_refuse_unknown boolean,
  p_unread_max integer, p_digest text, p_since double precision, p_trim_before double precision,
  p_now double precision, p_id text, p_from text, p_to text, p_subject text, p_body text,
  p_type text, p_priority text, p_thread text, p_payload text, p_created text,
  p_broadcast text, p_notify text, p_nudge text, p_stamp text
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(k, 0))
  FROM unnest(p_locks) WITH ORDINALITY AS u(k, n) ORDER BY n;
  IF p_digest IS NOT NULL AND EXISTS (
    SELECT 1 FROM am_recent_sends WHERE digest = p_digest AND at > p_since
  ) THEN
    RETURN 'slow';
  END IF;
  IF p_check IS NOT NULL THEN
    SELECT state INTO v_state FROM am_agents WHERE name = p_check FOR SHARE;
    IF v_state IS NULL AND p_refuse_unknown THEN
      RETURN 'slow';
    END IF;
    IF v_state = ANY (p_refused) THEN
      RETURN 'slow';
    END IF;
  END IF;
  IF p_unread_max > 0 AND EXISTS (
    SELECT 1 FROM messages WHERE to_agent = p_to AND read = 0 LIMIT 1 OFFSET p_unread_max - 1
  ) THEN
    RETURN 'slow';
  END IF;
  INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority, thread_id,
                        payload, read, created_at, broadcast_id)
  VALUES (p_id, p_from, p_to, p_subject, p_body, p_type, p_priority, p_thread, p_payload, 0,
          p_created, p_broadcast);
  IF p_digest IS NOT NULL THEN
    IF p_trim_before IS NOT NULL THEN
      DELETE FROM am_recent_sends WHERE at <= p_trim_before;
    END IF;
    INSERT INTO am_recent_sends (digest, message_ids, at)
    VALUES (p_digest, jsonb_build_array(p_id), p_now)
    ON CONFLICT (digest) DO UPDATE SET message_ids = EXCLUDED.message_ids, at = EXCLUDED.at;
  END IF;
  IF p_notify <> '' THEN
    PERFORM pg_notify('agentmaild_mail', p_notify);
  END IF;
  IF p_nudge IS NOT NULL THEN
    INSERT INTO am_nudges (agent, message_id, reason, created_at)
    VALUES (p_to, p_id, p_nudge, p_stamp) ON CONFLICT DO NOTHING;
  END IF;
  RETURN 'sent';
END
$$
