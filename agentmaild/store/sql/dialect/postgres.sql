-- PostgreSQL's own queries: only those whose text truly differs from queries.sql (which this
-- file overrides, name for name) and those SQLite has no form of. Same format and :name
-- parameters; the loader turns them into psycopg's placeholders.

-- name: lock_key
-- A transaction-scoped advisory lock on a name (an agent's inbox, an idempotency key): the
-- writes SQLite serialises with BEGIN IMMEDIATE are serialised per name here instead.
SELECT pg_advisory_xact_lock(hashtextextended(:key, 0));

-- name: lock_keys
-- The same for several names in one statement, taken in the order given (sorted by the caller,
-- so two transactions never take the same two locks in opposite orders).
SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS n
FROM (SELECT k FROM unnest(:keys::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n) AS ordered;

-- name: notify_mail
-- Wake-up for the daemons LISTENing on the store: the recipients of this transaction's mail
-- (PostgreSQL delivers it at commit, and folds identical notifications of one transaction).
SELECT pg_notify('agentmaild_mail', :recipients);

-- name: agent_get_for_update
-- The row locked until the transaction ends: a concurrent update or state change waits.
SELECT * FROM am_agents WHERE name = :name FOR UPDATE;

-- name: unread_among
SELECT id FROM messages WHERE id = ANY (:ids::text[]) AND read = 0;

-- name: mark_read
UPDATE messages SET read = 1, acked_at = :stamp, acked_by = :by
WHERE id = ANY(:ids::text[]) AND read = 0
RETURNING id, to_agent;

-- name: delivery_ack
-- The batch's unread messages read (acked_by names the delivery), their nudges dropped;
-- returns the messages newly acked (delivery_close then closes the delivery).
WITH done AS (
  UPDATE messages SET read = 1, acked_at = :stamp, acked_by = :id
  WHERE delivery_id = :id AND read = 0
  RETURNING id, to_agent
), gone AS (
  DELETE FROM am_nudges n USING done WHERE n.agent = done.to_agent AND n.message_id = done.id
)
SELECT id, to_agent FROM done;

-- name: orphans_idempotency_delete
DELETE FROM am_idempotency i WHERE NOT EXISTS
  (SELECT 1 FROM jsonb_array_elements_text(i.message_ids) j(id)
   JOIN messages m ON m.id = j.id);

-- name: attempts_list
-- message_ids is jsonb here: ? tests membership.
SELECT * FROM am_attempts
WHERE (:agent::text IS NULL OR agent = :agent)
  AND (:since::double precision IS NULL OR at >= :since)
  AND (:message::text IS NULL OR message_ids ? :message)
ORDER BY id DESC
LIMIT :limit;

-- name: recent_sends_prune
-- No rowid order here: the rows that left the window, by time (about one send in PRUNE_EVERY).
DELETE FROM am_recent_sends WHERE at <= :before;

-- name: recent_send_put
INSERT INTO am_recent_sends (digest, message_ids, at) VALUES (:digest, :ids, :at)
ON CONFLICT (digest) DO UPDATE SET message_ids = EXCLUDED.message_ids, at = EXCLUDED.at;

-- name: claim_pending_delivery
-- The general claim's rows (claim.claim_in) are taken as am_claim takes them: a row another
-- transaction is working on is passed over, never waited for nor taken twice.
SELECT id, attempts FROM am_deliveries WHERE agent = :agent AND state = 'pending' AND queue IS NULL
ORDER BY created_at, id LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: claim_candidates
SELECT * FROM messages WHERE to_agent = :agent AND read = 0 AND delivery_id IS NULL
ORDER BY CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         created_at, id
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: claim_mark
UPDATE messages SET delivery_id = :delivery
WHERE id IN (SELECT jsonb_array_elements_text(:ids::jsonb));

-- name: claim_pending_queue_delivery
-- Rows another member's claim is working on are passed over, never waited for.
SELECT id, queue FROM am_deliveries
WHERE state = 'pending' AND queue IN (SELECT jsonb_array_elements_text(:queues::jsonb))
ORDER BY created_at, id LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: claim_queue_candidate
SELECT m.* FROM messages m
WHERE m.read = 0 AND m.delivery_id IS NULL
  AND m.to_agent IN (SELECT 'queue:' || j FROM jsonb_array_elements_text(:queues::jsonb) AS j)
ORDER BY CASE m.priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         m.created_at, m.id
LIMIT 1
FOR UPDATE OF m SKIP LOCKED;

-- name: send_one
-- The common send in one statement (am_send_one, functions.sql): 'sent', or 'slow' having
-- written nothing (then the general send runs). Its locks are at most two names (the inbox, the
-- digest), passed as two texts (NULL: none) and its refused states are constants written into
-- the statement (queries._constants): no array is dumped client-side per send.
SELECT am_send_one(
  array_remove(ARRAY[:lock1::text, :lock2::text], NULL), :check::text,
  {refused}::text[], :refuse_unknown::boolean,
  :unread_max::integer, :digest::text, :since::double precision,
  :trim_before::double precision, :now::double precision, :id::text,
  :from_agent::text, :to_agent::text, :subject::text, :body::text, :type::text,
  :priority::text, :thread_id::text, :payload::text, :created_at::text,
  :broadcast_id::text, :notify::text, :nudge::text, :stamp::text) AS outcome;

-- name: claim_one
-- The daemon's claim in one statement (am_claim, functions.sql): the claim's rows; none when
-- there is nothing; one row with claim_id NULL when the general claim must look at the agent's
-- queues.
SELECT * FROM am_claim(
  :agent::text, :now::double precision, :lease_until::double precision,
  :stamp::text, :max_messages::integer, :max_chars::integer, :new_id::text);

-- name: ack_one
-- The ack in one statement (am_ack, functions.sql): how many messages it marked read, and the
-- error of a history row that could not be written (NULL when written or not asked for).
SELECT * FROM am_ack(
  :id::text, :stamp::text, :reached_stamp::text, :record::boolean,
  :record_id::text, :agent::text, :message_ids::jsonb, :attempt::integer,
  :outcome::text, :error::text, :duration_s::double precision,
  :at::double precision);
