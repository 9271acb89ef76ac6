-- PostgreSQL's server-side functions and their triggers: the current definition of each, once.
-- postgres_migrate applies this file, whole and idempotently (CREATE OR REPLACE), after every
-- migration run, in the migration's transaction; the migration steps (migrations/pg_N.sql) carry
-- schema changes only. A change here that an existing database must receive comes with a new
-- schema version (its step may be empty): a database at the current version is not re-applied.
-- Statements are separated by a line holding only "-- ;" (a function body holds ";").

-- am_registry_bump: every change of the agent registry bumps am_registry.version and wakes the
-- daemons LISTENing on agentmaild_registry (folded to one notification per transaction).
CREATE OR REPLACE FUNCTION am_registry_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE am_registry SET version = version + 1 WHERE id = 1;
  PERFORM pg_notify('agentmaild_registry', '');  -- folded to one per transaction
  RETURN NULL;
END $$
-- ;
CREATE OR REPLACE TRIGGER am_registry_on_insert AFTER INSERT ON am_agents
FOR EACH ROW EXECUTE FUNCTION am_registry_bump()
-- ;
CREATE OR REPLACE TRIGGER am_registry_on_delete AFTER DELETE ON am_agents
FOR EACH ROW EXECUTE FUNCTION am_registry_bump()
-- ;
CREATE OR REPLACE TRIGGER am_registry_on_update
AFTER UPDATE OF capability, parent, state, channel, command, cwd, tmux_target, tmux_socket,
                preset, poll_interval_s, settings ON am_agents
FOR EACH ROW EXECUTE FUNCTION am_registry_bump()
-- ;
-- am_agent_ending: a send reads its recipient's state under the advisory lock
-- "agentmaild:inbox:<recipient>" (it took it already for a capped inbox), and every transaction
-- that moves an agent into a refused state or deletes it takes the same lock, whoever writes it:
-- a send and such a change run one after the other, and the send, reading the state after its
-- lock in a statement of its own, sees the change once it has committed. The lock is taken
-- after the row lock of the UPDATE or DELETE; a send takes no row lock of an agent, so the two
-- orders cannot deadlock.
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
-- am_send_one: the common send (one message, no idempotency key, no rate limit, no thread guard)
-- in one statement: the same locks, checks and writes, in the same order, as the store's general
-- send (store/send.py, insert). It writes only when every check passes; on anything the
-- general send would answer otherwise (a repeat inside the window, a refused recipient, a full
-- inbox) it writes nothing and returns 'slow', and the caller runs the general send. The
-- recipient's state is read plainly (its inbox lock is among p_locks, see am_agent_ending); the
-- loop guard's recent-sends row is one plain INSERT when the digest has no row (the send holds
-- the digest's lock, so none can appear meanwhile), instead of a speculative insertion.
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
-- ;
-- am_claim: the daemon's claim in one statement, in its own transaction: the same claim as the
-- general one (claim.claim_in, written over the connector), which runs instead when this answers
-- its queue marker. It takes the agent's advisory lock first; a VOLATILE plpgsql function takes a
-- fresh snapshot per statement, so what follows the lock sees whatever the previous holder
-- committed. The claim: nothing while the agent holds a live lease; else its oldest pending
-- redelivery (not of a queue: those are claimed by queue) (same id, next attempt), pending
-- deliveries before it whose mail was all read another way closed on the way; else new mail in
-- delivery order cut at max_messages and max_chars (at least one). Rows are taken FOR UPDATE SKIP
-- LOCKED: a row another transaction is working on is passed over, never waited for nor taken
-- twice. Most claims find no live lease and no pending redelivery: one probe by (agent, state)
-- says so, and then only the new-mail statement runs.
--
-- It returns the claim's rows (claim_id, claim_attempt, the message's columns, claim_more).
-- claim_more is false only when new mail was claimed, every row found was taken (fewer than
-- max_messages, none cut by max_chars) and the agent is in no work queue, as the general claim
-- says it (the daemon's loop then waits for a wake-up). When the agent's own mail gave nothing and
-- it is a member of a work queue, it returns one row whose claim_id is NULL, having written
-- nothing but the drained deliveries: the caller then runs the general claim, which takes queue
-- work.
CREATE OR REPLACE FUNCTION am_claim(
  p_agent text, p_now double precision, p_lease_until double precision, p_stamp text,
  p_max_messages integer, p_max_chars integer, p_new_id text
) RETURNS TABLE (
  claim_id text, claim_attempt integer, id text, from_agent text, to_agent text, subject text,
  body text, type text, priority text, thread_id text, payload text, read integer,
  created_at text, broadcast_id text, delivery_id text, acked_at text, acked_by text,
  claim_more boolean
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('agentmaild:agent:' || p_agent, 0));
  IF EXISTS (
    SELECT 1 FROM am_deliveries a
    WHERE a.agent = p_agent AND a.state IN ('claimed', 'pending')
      AND CASE a.state WHEN 'claimed' THEN a.lease_until > p_now ELSE a.queue IS NULL END
  ) THEN
    IF EXISTS (
      SELECT 1 FROM am_deliveries a
      WHERE a.agent = p_agent AND a.state = 'claimed' AND a.lease_until > p_now
    ) THEN
      RETURN;  -- a live lease: nothing to claim
    END IF;
    RETURN QUERY
    WITH pick AS (
      SELECT d.id, d.created_at FROM am_deliveries d
      WHERE d.agent = p_agent AND d.state = 'pending' AND d.queue IS NULL
        AND EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id AND m.read = 0)
      ORDER BY d.created_at, d.id
      LIMIT 1
      FOR UPDATE SKIP LOCKED
    ), drained AS (
      UPDATE am_deliveries d SET state = 'acked', updated_at = p_stamp
      WHERE d.agent = p_agent AND d.state = 'pending' AND d.queue IS NULL
        AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id AND m.read = 0)
        AND (NOT EXISTS (SELECT 1 FROM pick)
             OR (d.created_at, d.id) < (SELECT p.created_at, p.id FROM pick p))
    ), redo AS (
      UPDATE am_deliveries d
      SET state = 'claimed', attempts = d.attempts + 1, lease_until = p_lease_until,
          updated_at = p_stamp
      FROM pick WHERE d.id = pick.id
      RETURNING d.id, d.attempts
    )
    SELECT r.id::text, r.attempts, m.id::text, m.from_agent::text, m.to_agent::text, m.subject,
           m.body, m.type, m.priority, m.thread_id::text, m.payload, m.read, m.created_at::text,
           m.broadcast_id::text, m.delivery_id::text, m.acked_at::text, m.acked_by::text, true
    FROM redo r JOIN messages m ON m.delivery_id = r.id AND m.read = 0;
    IF FOUND THEN
      RETURN;  -- the redelivery
    END IF;
  END IF;
  RETURN QUERY
  WITH fresh AS (
    SELECT m.id, m.created_at,
           CASE m.priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3
           END AS rank,
           char_length(m.subject) + char_length(m.body) + coalesce(char_length(m.payload), 0)
             AS size
    FROM messages m
    WHERE m.to_agent = p_agent AND m.read = 0 AND m.delivery_id IS NULL
    ORDER BY rank, m.created_at, m.id
    LIMIT p_max_messages
    FOR UPDATE SKIP LOCKED
  ), chosen AS (
    SELECT c.id FROM (
      SELECT f.id, row_number() OVER w AS n, sum(f.size) OVER w AS used
      FROM fresh f WINDOW w AS (ORDER BY f.rank, f.created_at, f.id ROWS UNBOUNDED PRECEDING)
    ) c
    WHERE c.n = 1 OR c.used <= p_max_chars
  ), born AS (
    INSERT INTO am_deliveries (id, agent, state, attempts, failures, lease_until, created_at,
                               updated_at)
    SELECT p_new_id, p_agent, 'claimed', 1, 0, p_lease_until, p_stamp, p_stamp
    WHERE EXISTS (SELECT 1 FROM chosen)
    RETURNING am_deliveries.id, am_deliveries.attempts
  ), marked AS (
    UPDATE messages m SET delivery_id = p_new_id FROM chosen WHERE m.id = chosen.id
    RETURNING m.*
  ), more AS (
    SELECT coalesce((SELECT count(*) FROM fresh) >= p_max_messages, true)
           OR (SELECT count(*) FROM fresh) > (SELECT count(*) FROM chosen)
           OR EXISTS (SELECT 1 FROM am_queue_members q WHERE q.agent = p_agent) AS any_left
  )
  SELECT b.id::text, b.attempts, k.id::text, k.from_agent::text, k.to_agent::text, k.subject,
         k.body, k.type, k.priority, k.thread_id::text, k.payload, k.read, k.created_at::text,
         k.broadcast_id::text, k.delivery_id::text, k.acked_at::text, k.acked_by::text,
         o.any_left
  FROM born b CROSS JOIN marked k CROSS JOIN more o;
  IF NOT FOUND AND EXISTS (SELECT 1 FROM am_queue_members q WHERE q.agent = p_agent) THEN
    RETURN QUERY SELECT NULL::text, NULL::integer, NULL::text, NULL::text, NULL::text,
      NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer,
      NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::boolean;
  END IF;
END
$$
-- ;
-- am_ack settles a delivery as the general ack does: in one statement, a message of the batch
-- another tool read meanwhile keeps read = 1 and gets acked_by 'elsewhere' (only when nothing
-- acked it yet), a message still unread is read and acked by this delivery, its nudge dropped;
-- the delivery is closed; the history row (p_record) is written in a subtransaction whose
-- failure never fails the ack (the error comes back in `unrecorded`, for the log); an agent still
-- booting becomes working once a message reached it. Returns how many messages it marked read.
CREATE OR REPLACE FUNCTION am_ack(
  p_id text, p_stamp text, p_reached_stamp text, p_record boolean, p_record_id text,
  p_agent text, p_message_ids jsonb, p_attempt integer, p_outcome text, p_error text,
  p_duration_s double precision, p_at double precision
) RETURNS TABLE (acked integer, unrecorded text) LANGUAGE plpgsql AS $$
DECLARE
  v_to text;
  v_holder text;
BEGIN
  WITH settled AS (
    UPDATE messages
    SET read = 1, acked_at = p_stamp,
        acked_by = CASE WHEN messages.read = 0 THEN p_id ELSE 'elsewhere' END
    WHERE messages.delivery_id = p_id
      AND (messages.read = 0 OR messages.acked_by IS NULL)
    RETURNING messages.id, messages.to_agent, messages.acked_by
  ), done AS (
    SELECT s.id, s.to_agent FROM settled s WHERE s.acked_by = p_id
  ), gone AS (
    DELETE FROM am_nudges n USING done WHERE n.agent = done.to_agent AND n.message_id = done.id
  )
  SELECT count(*)::integer, min(done.to_agent) INTO acked, v_to FROM done;
  UPDATE am_deliveries SET state = 'acked', failures = 0, lease_until = NULL,
                           updated_at = p_stamp
  WHERE am_deliveries.id = p_id AND am_deliveries.state = 'claimed'
  RETURNING am_deliveries.agent INTO v_holder;
  IF p_record THEN
    BEGIN
      INSERT INTO am_attempts (delivery_id, agent, message_ids, attempt, outcome, error,
                               duration_s, at)
      VALUES (p_record_id, p_agent, p_message_ids, p_attempt, p_outcome, p_error, p_duration_s,
              p_at);
    EXCEPTION WHEN OTHERS THEN
      unrecorded := SQLERRM;
    END;
  END IF;
  IF acked > 0 THEN
    -- The holder, not the address: queue mail is addressed to the queue.
    UPDATE am_agents SET state = 'working', updated_at = p_reached_stamp
    WHERE am_agents.name = coalesce(v_holder, v_to) AND am_agents.state = 'booting';
  END IF;
  RETURN NEXT;
END
$$
