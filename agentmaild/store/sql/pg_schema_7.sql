-- agentmaild's PostgreSQL schema, version 7 (PostgreSQL only): the daemon's claim and ack as one
-- call each. A claim (BEGIN, the agent's advisory lock, the claim statement, COMMIT) and an ack
-- (BEGIN, three updates, the history row in a savepoint, the agent reached, COMMIT) were two or
-- three round trips each; as a server-side function each is one statement in its own
-- transaction. Same locks, same statements, same order as before (the claim statement of
-- pg_queries.sql, the ack's three updates): the function takes the agent's lock first, and a
-- VOLATILE plpgsql function takes a fresh snapshot per statement, so the claim after the lock
-- sees whatever the previous holder committed. The claim statement lives only here (the
-- general claim, postgres_deliveries.claim_in, calls am_claim inside its own transaction).
--
-- The claim: the agent's oldest pending redelivery (not of a queue: those are claimed by queue,
-- in postgres_queues) (same id, next attempt) when there is one, else new mail in delivery order
-- cut at max_messages and max_chars (at least one), all only while the agent holds no live
-- lease. Rows are taken FOR UPDATE SKIP LOCKED, so a row another transaction is working on is
-- passed over, never waited for nor taken twice. Pending deliveries before the chosen one whose
-- mail was all read another way are closed on the way.
--
-- am_claim returns the claim's rows (claim_id, claim_attempt, the message's columns). When the
-- agent's own mail gave nothing and it is a member of a work queue, it returns one row whose
-- claim_id is NULL, having written nothing but the drained deliveries (the general claim closes
-- those too): the caller then runs the general claim, which takes queue work.
CREATE OR REPLACE FUNCTION am_claim(
  p_agent text, p_now double precision, p_lease_until double precision, p_stamp text,
  p_max_messages integer, p_max_chars integer, p_new_id text
) RETURNS TABLE (
  claim_id text, claim_attempt integer, id text, from_agent text, to_agent text, subject text,
  body text, type text, priority text, thread_id text, payload text, read integer,
  created_at text, broadcast_id text, delivery_id text, acked_at text, acked_by text
) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('agentmaild:agent:' || p_agent, 0));
  RETURN QUERY
  WITH active AS (
    SELECT 1 FROM am_deliveries a
    WHERE a.agent = p_agent AND a.state = 'claimed' AND a.lease_until > p_now
    LIMIT 1
  ), pick AS (
    SELECT d.id, d.created_at FROM am_deliveries d
    WHERE d.agent = p_agent AND d.state = 'pending' AND d.queue IS NULL
      AND NOT EXISTS (SELECT 1 FROM active)
      AND EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id AND m.read = 0)
    ORDER BY d.created_at, d.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
  ), drained AS (
    UPDATE am_deliveries d SET state = 'acked', updated_at = p_stamp
    WHERE d.agent = p_agent AND d.state = 'pending' AND d.queue IS NULL
      AND NOT EXISTS (SELECT 1 FROM active)
      AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id AND m.read = 0)
      AND (NOT EXISTS (SELECT 1 FROM pick)
           OR (d.created_at, d.id) < (SELECT p.created_at, p.id FROM pick p))
  ), redo AS (
    UPDATE am_deliveries d
    SET state = 'claimed', attempts = d.attempts + 1, lease_until = p_lease_until,
        updated_at = p_stamp
    FROM pick WHERE d.id = pick.id
    RETURNING d.id, d.attempts
  ), fresh AS (
    SELECT m.id, m.created_at,
           CASE m.priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3
           END AS rank,
           char_length(m.subject) + char_length(m.body) + coalesce(char_length(m.payload), 0)
             AS size
    FROM messages m
    WHERE m.to_agent = p_agent AND m.read = 0 AND m.delivery_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM active) AND NOT EXISTS (SELECT 1 FROM pick)
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
  )
  SELECT r.id::text, r.attempts, m.id::text, m.from_agent::text, m.to_agent::text, m.subject,
         m.body, m.type, m.priority, m.thread_id::text, m.payload, m.read, m.created_at::text,
         m.broadcast_id::text, m.delivery_id::text, m.acked_at::text, m.acked_by::text
  FROM redo r JOIN messages m ON m.delivery_id = r.id AND m.read = 0
  UNION ALL
  SELECT b.id::text, b.attempts, k.id::text, k.from_agent::text, k.to_agent::text, k.subject,
         k.body, k.type, k.priority, k.thread_id::text, k.payload, k.read, k.created_at::text,
         k.broadcast_id::text, k.delivery_id::text, k.acked_at::text, k.acked_by::text
  FROM born b CROSS JOIN marked k;
  IF NOT FOUND AND EXISTS (SELECT 1 FROM am_queue_members q WHERE q.agent = p_agent) THEN
    RETURN QUERY SELECT NULL::text, NULL::integer, NULL::text, NULL::text, NULL::text,
      NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer,
      NULL::text, NULL::text, NULL::text, NULL::text, NULL::text;
  END IF;
END
$$
-- ;
-- am_ack settles a delivery as postgres_deliveries._ack does: the batch's messages another tool
-- read meanwhile are marked read elsewhere, the rest read by this delivery (their nudges
-- dropped), the delivery closed; the history row (p_record) is written in a subtransaction
-- whose failure never fails the ack (the error comes back in `unrecorded`, for the log); an
-- agent still booting becomes working once a message reached it. Returns how many messages
-- this ack marked read.
CREATE OR REPLACE FUNCTION am_ack(
  p_id text, p_stamp text, p_reached_stamp text, p_record boolean, p_record_id text,
  p_agent text, p_message_ids jsonb, p_attempt integer, p_outcome text, p_error text,
  p_duration_s double precision, p_at double precision
) RETURNS TABLE (acked integer, unrecorded text) LANGUAGE plpgsql AS $$
DECLARE
  v_to text;
  v_holder text;
BEGIN
  UPDATE messages SET acked_by = 'elsewhere', acked_at = p_stamp
  WHERE messages.delivery_id = p_id AND messages.read = 1 AND messages.acked_by IS NULL;
  WITH done AS (
    UPDATE messages SET read = 1, acked_at = p_stamp, acked_by = p_id
    WHERE messages.delivery_id = p_id AND messages.read = 0
    RETURNING messages.id, messages.to_agent
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
