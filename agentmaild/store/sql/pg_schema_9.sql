-- agentmaild's PostgreSQL schema, version 9 (PostgreSQL only): a send's recipient check without
-- a row lock, and the loop guard's recent sends without WAL.
--
-- Until version 8 a send read its recipient's state FOR SHARE, so that the recipient could not
-- end (or be removed) between the check and the send's commit. That share lock is a write: it
-- stamps the agent's row (a dirtied page, a WAL record) on every send, and it made sends to one
-- agent queue behind each other's row stamps. From version 9 the same exclusion is an advisory
-- lock: a send takes the lock "agentmaild:inbox:<recipient>" for every recipient it checks (it
-- took it already for a capped inbox), and the trigger below takes the same lock in every
-- transaction that moves an agent into a refused state or deletes it, whoever writes it. A send
-- and such a change therefore run one after the other; the send reads the state after taking the
-- lock, in a statement of its own, so it sees the change once the change has committed.
--
-- The lock is taken after the row lock of the UPDATE or DELETE; a send takes no row lock of an
-- agent, so the two orders cannot deadlock.
CREATE OR REPLACE FUNCTION am_agent_ending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('agentmaild:inbox:' || OLD.name, 0));
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END
$$
-- ;
CREATE OR REPLACE TRIGGER am_agent_ending_on_update BEFORE UPDATE OF state ON am_agents
  FOR EACH ROW WHEN (NEW.state IN ('completed', 'zombie') AND NEW.state IS DISTINCT FROM OLD.state)
  EXECUTE FUNCTION am_agent_ending()
-- ;
CREATE OR REPLACE TRIGGER am_agent_ending_on_delete BEFORE DELETE ON am_agents
  FOR EACH ROW EXECUTE FUNCTION am_agent_ending()
-- ;
-- The loop guard's memory of recent sends is a cache of the last window's digests, written by
-- every send: unlogged, it costs a send no WAL. A server crash (not a clean shutdown) or a
-- fail-over to a standby empties it; the only effect is that a repeat sent right after is
-- delivered instead of collapsed.
ALTER TABLE am_recent_sends SET UNLOGGED
-- ;
-- am_send_one: version 8's, with the recipient's state read plainly (the caller passes the
-- recipient's inbox lock among p_locks, see above) and the locks taken in a loop.
CREATE OR REPLACE FUNCTION am_send_one(
  p_locks text[], p_check text, p_refused text[], p_refuse_unknown boolean,
  p_unread_max integer, p_digest text, p_since double precision, p_trim_before double precision,
  p_now double precision, p_id text, p_from text, p_to text, p_subject text, p_body text,
  p_type text, p_priority text, p_thread text, p_payload text, p_created text,
  p_broadcast text, p_notify text, p_nudge text, p_stamp text
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  v_state text;
  v_at double precision;
  v_lock text;
BEGIN
  FOREACH v_lock IN ARRAY p_locks LOOP
    PERFORM pg_advisory_xact_lock(hashtextextended(v_lock, 0));
  END LOOP;
  IF p_digest IS NOT NULL THEN
    SELECT at INTO v_at FROM am_recent_sends WHERE digest = p_digest;
    IF v_at > p_since THEN
      RETURN 'slow';
    END IF;
  END IF;
  IF p_check IS NOT NULL THEN
    SELECT state INTO v_state FROM am_agents WHERE name = p_check;
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
    IF v_at IS NULL THEN
      INSERT INTO am_recent_sends (digest, message_ids, at)
      VALUES (p_digest, jsonb_build_array(p_id), p_now);
    ELSE
      INSERT INTO am_recent_sends (digest, message_ids, at)
      VALUES (p_digest, jsonb_build_array(p_id), p_now)
      ON CONFLICT (digest) DO UPDATE SET message_ids = EXCLUDED.message_ids, at = EXCLUDED.at;
    END IF;
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
