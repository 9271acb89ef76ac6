-- Named queries of the PostgreSQL store (psycopg placeholders). Each block starts with
-- "-- name: <name>"; the SQLite store's queries of the same name say the same thing.

-- name: lock_key
-- A transaction-scoped advisory lock on a name (an agent's inbox, an idempotency key): the
-- writes SQLite serialises with BEGIN IMMEDIATE are serialised per name here instead.
SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0));

-- name: lock_keys
-- The same for several names in one statement, taken in the order given (sorted by the caller,
-- so two transactions never take the same two locks in opposite orders).
SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS n
FROM (SELECT k FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS u(k, n) ORDER BY n) AS ordered;

-- name: notify_mail
-- Wake-up for the daemons LISTENing on the store: the recipients of this transaction's mail
-- (PostgreSQL delivers it at commit, and folds identical notifications of one transaction).
SELECT pg_notify('agentmaild_mail', %(recipients)s);

-- name: insert_message
INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority, thread_id,
                      payload, read, created_at, broadcast_id)
VALUES (%(id)s, %(from_agent)s, %(to_agent)s, %(subject)s, %(body)s, %(type)s, %(priority)s,
        %(thread_id)s, %(payload)s, 0, %(created_at)s, %(broadcast_id)s);

-- name: get_message
SELECT * FROM messages WHERE id = %(id)s;

-- name: unread_among
SELECT id FROM messages WHERE id = ANY (%(ids)s::text[]) AND read = 0;

-- name: unread_count_reaches
SELECT 1 FROM messages WHERE to_agent = %(to)s AND read = 0 LIMIT 1 OFFSET %(cap)s - 1;

-- name: rate_count
SELECT count(*) FROM am_rate_log
WHERE from_agent = %(from)s AND to_agent = %(to)s AND at > %(since)s;

-- name: rate_insert
INSERT INTO am_rate_log (from_agent, to_agent, at) VALUES (%(from)s, %(to)s, %(at)s);

-- name: rate_trim
DELETE FROM am_rate_log WHERE at <= %(before)s;

-- name: rate_reset
DELETE FROM am_rate_log WHERE from_agent = %(from)s AND to_agent = %(to)s;

-- name: idem_get
SELECT content_hash, message_ids FROM am_idempotency WHERE sender = %(sender)s AND key = %(key)s;

-- name: idem_put
INSERT INTO am_idempotency (sender, key, content_hash, message_ids, created_at)
VALUES (%(sender)s, %(key)s, %(digest)s, %(ids)s, %(stamp)s);

-- name: nudge_put
INSERT INTO am_nudges (agent, message_id, reason, created_at)
VALUES (%(agent)s, %(message_id)s, %(reason)s, %(stamp)s) ON CONFLICT DO NOTHING;

-- name: inbox_all
SELECT * FROM messages WHERE to_agent = %(agent)s ORDER BY created_at, id;

-- name: inbox_unread
SELECT * FROM messages WHERE to_agent = %(agent)s AND read = 0 ORDER BY created_at, id;

-- name: pull_candidates
SELECT m.* FROM messages m
WHERE m.to_agent = %(agent)s AND m.read = 0
  AND (m.delivery_id IS NULL
       OR NOT EXISTS (SELECT 1 FROM am_deliveries d
                      WHERE d.id = m.delivery_id AND d.state = 'claimed'))
ORDER BY CASE m.priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         m.created_at, m.id;

-- name: mark_read
WITH done AS (
  UPDATE messages SET read = 1, acked_at = %(stamp)s, acked_by = %(by)s
  WHERE id = ANY(%(ids)s) AND read = 0
  RETURNING id, to_agent
), gone AS (
  DELETE FROM am_nudges n USING done WHERE n.agent = done.to_agent AND n.message_id = done.id
)
SELECT id, to_agent FROM done;

-- name: agent_reached
UPDATE am_agents SET state = 'working', updated_at = %(stamp)s
WHERE name = %(agent)s AND state = 'booting';

-- name: thread
SELECT * FROM messages WHERE thread_id = %(t)s OR id = %(t)s ORDER BY created_at, id;

-- name: nudges_for
SELECT n.message_id, n.reason, m.subject, m.priority, m.type, m.from_agent
FROM am_nudges n JOIN messages m ON m.id = n.message_id
WHERE n.agent = %(agent)s AND m.read = 0 ORDER BY n.created_at, n.message_id;

-- name: nudges_clear
DELETE FROM am_nudges WHERE agent = %(agent)s;

-- name: agent_get
SELECT * FROM am_agents WHERE name = %(name)s;

-- name: agent_state
-- Read under the recipient's inbox lock, which a change into a refused state or a removal takes
-- too (schema 9's trigger): the recipient cannot end before the send commits.
SELECT state FROM am_agents WHERE name = %(name)s;

-- name: registry_version
SELECT version FROM am_registry WHERE id = 1;

-- name: agent_list
SELECT * FROM am_agents ORDER BY name;

-- name: agent_insert
INSERT INTO am_agents (name, capability, parent, state, channel, command, cwd, tmux_target,
                       tmux_socket, preset, session_id, poll_interval_s, settings,
                       turn_state, turn_state_at, created_at, updated_at, host)
VALUES (%(name)s, %(capability)s, %(parent)s, %(state)s, %(channel)s, %(command)s, %(cwd)s,
        %(tmux_target)s, %(tmux_socket)s, %(preset)s, %(session_id)s, %(poll_interval_s)s,
        %(settings)s, %(turn_state)s, %(turn_state_at)s, %(created_at)s, %(updated_at)s,
        %(host)s);

-- name: agent_set_state
UPDATE am_agents SET state = %(state)s, updated_at = %(stamp)s WHERE name = %(name)s
RETURNING *;

-- name: agent_delete
DELETE FROM am_agents WHERE name = %(name)s;

-- name: delivery_unread
SELECT * FROM messages WHERE delivery_id = %(id)s AND read = 0
ORDER BY CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         created_at, id;

-- name: delivery_ack
-- The batch's unread messages read (acked_by names the delivery), their nudges dropped;
-- returns the messages newly acked (delivery_close then closes the delivery).
WITH done AS (
  UPDATE messages SET read = 1, acked_at = %(stamp)s, acked_by = %(id)s
  WHERE delivery_id = %(id)s AND read = 0
  RETURNING id, to_agent
), gone AS (
  DELETE FROM am_nudges n USING done WHERE n.agent = done.to_agent AND n.message_id = done.id
)
SELECT id, to_agent FROM done;

-- name: delivery_extend_lease
UPDATE am_deliveries SET lease_until = %(until)s WHERE id = %(id)s AND state = 'claimed';

-- name: delivery_release
UPDATE am_deliveries
SET state = CASE WHEN failures + %(count)s >= %(max_attempts)s THEN 'dead' ELSE 'pending' END,
    failures = failures + %(count)s, lease_until = NULL, last_error = %(error)s,
    updated_at = %(now)s
WHERE id = %(id)s AND state = 'claimed'
RETURNING state, failures;

-- name: deliveries_expired
UPDATE am_deliveries SET state = 'pending', lease_until = NULL, updated_at = %(stamp)s
WHERE state = 'claimed' AND (%(agent)s::text IS NULL OR agent = %(agent)s)
  AND (lease_until <= %(now)s OR (%(everything)s AND (
  %(host)s::text IS NULL OR EXISTS (SELECT 1 FROM am_agents a WHERE a.name = am_deliveries.agent
                                      AND (a.host IS NULL OR a.host = %(host)s)))))
RETURNING id, agent;

-- name: deliveries_orphaned_delete
DELETE FROM am_deliveries d WHERE d.state <> 'claimed' AND NOT EXISTS
  (SELECT 1 FROM messages m WHERE m.delivery_id = d.id);

-- name: dead_list
SELECT d.*, coalesce((SELECT array_agg(m.id ORDER BY m.created_at, m.id) FROM messages m
                      WHERE m.delivery_id = d.id), '{}') AS message_ids
FROM am_deliveries d
WHERE d.state = 'dead' AND (%(agent)s::text IS NULL OR d.agent = %(agent)s)
  AND EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id)
ORDER BY d.updated_at, d.id;

-- name: retry_dead
UPDATE am_deliveries SET state = 'pending', failures = 0, updated_at = %(now)s
WHERE state = 'dead' AND (%(agent)s::text IS NULL OR agent = %(agent)s)
  AND (%(id)s::text IS NULL OR id = %(id)s)
RETURNING id;

-- name: pending_agents
-- Agents with mail to claim: addressed to them, or to a queue they are a member of.
SELECT DISTINCT m.to_agent FROM messages m
WHERE m.read = 0
  AND (m.delivery_id IS NULL
       OR EXISTS (SELECT 1 FROM am_deliveries d WHERE d.id = m.delivery_id AND d.state = 'pending'))
UNION
SELECT q.agent FROM am_queue_members q
WHERE EXISTS (SELECT 1 FROM messages m
              WHERE m.to_agent = 'queue:' || q.queue AND m.read = 0
                AND (m.delivery_id IS NULL
                     OR EXISTS (SELECT 1 FROM am_deliveries d
                                WHERE d.id = m.delivery_id AND d.state = 'pending')));

-- name: count_unread
SELECT to_agent, count(*) FROM messages WHERE read = 0 GROUP BY to_agent;

-- name: count_deliveries
-- A claim is in flight until settled; a dead letter counts while it has messages to retry.
SELECT agent, state, count(*) FROM am_deliveries d
WHERE state = 'claimed'
   OR (state = 'dead' AND EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id))
GROUP BY agent, state;

-- name: count_messages
SELECT count(*) AS total, count(*) FILTER (WHERE read = 0) AS unread FROM messages;

-- name: proc_record
INSERT INTO am_agent_procs (pid, start_time, pgid, agent, delivery_id, daemon_pid, started_at)
VALUES (%(pid)s, %(start_time)s, %(pgid)s, %(agent)s, %(delivery_id)s, %(daemon_pid)s,
        %(started_at)s)
ON CONFLICT (pid, start_time) DO UPDATE SET
  pgid = EXCLUDED.pgid, agent = EXCLUDED.agent, delivery_id = EXCLUDED.delivery_id,
  daemon_pid = EXCLUDED.daemon_pid, started_at = EXCLUDED.started_at;

-- name: proc_forget
DELETE FROM am_agent_procs WHERE pid = %(pid)s AND start_time = %(start_time)s;

-- name: proc_list
SELECT * FROM am_agent_procs WHERE (%(agent)s::text IS NULL OR agent = %(agent)s)
ORDER BY started_at, pid;

-- name: attempt_insert
INSERT INTO am_attempts (delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at)
VALUES (%(delivery_id)s, %(agent)s, %(message_ids)s, %(attempt)s, %(outcome)s, %(error)s,
        %(duration_s)s, %(at)s);

-- name: attempts_list
SELECT * FROM am_attempts
WHERE (%(agent)s::text IS NULL OR agent = %(agent)s)
  AND (%(since)s::double precision IS NULL OR at >= %(since)s)
  AND (%(message)s::text IS NULL OR message_ids ? %(message)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: attempts_purge
DELETE FROM am_attempts
WHERE (%(older)s::double precision IS NULL OR at < %(older)s)
  AND (%(agent)s::text IS NULL OR agent = %(agent)s);

-- name: send_one
-- The common send in one statement (schema 6's am_send_one): 'sent', or 'slow' having written
-- nothing (then the general send runs). Its locks are at most two names (the inbox, the
-- digest), passed as two texts (NULL: none) and its refused states are constants written into
-- the statement (postgres_send_one): no array is dumped client-side per send.
SELECT am_send_one(
  array_remove(ARRAY[%(lock1)s::text, %(lock2)s::text], NULL), %(check)s::text,
  {refused}::text[], %(refuse_unknown)s::boolean,
  %(unread_max)s::integer, %(digest)s::text, %(since)s::double precision,
  %(trim_before)s::double precision, %(now)s::double precision, %(id)s::text,
  %(from_agent)s::text, %(to_agent)s::text, %(subject)s::text, %(body)s::text, %(type)s::text,
  %(priority)s::text, %(thread_id)s::text, %(payload)s::text, %(created_at)s::text,
  %(broadcast_id)s::text, %(notify)s::text, %(nudge)s::text, %(stamp)s::text) AS outcome;

-- name: claim_one
-- The daemon's claim in one statement (am_claim, schemas 7 and 8): the claim's rows; none when there
-- is nothing; one row with claim_id NULL when the general claim must look at the agent's queues.
SELECT * FROM am_claim(
  %(agent)s::text, %(now)s::double precision, %(lease_until)s::double precision,
  %(stamp)s::text, %(max_messages)s::integer, %(max_chars)s::integer, %(new_id)s::text);

-- name: ack_one
-- The ack in one statement (am_ack, schemas 7 and 8): how many messages it marked read, and the error
-- of a history row that could not be written (NULL when written or not asked for).
SELECT * FROM am_ack(
  %(id)s::text, %(stamp)s::text, %(reached_stamp)s::text, %(record)s::boolean,
  %(record_id)s::text, %(agent)s::text, %(message_ids)s::jsonb, %(attempt)s::integer,
  %(outcome)s::text, %(error)s::text, %(duration_s)s::double precision,
  %(at)s::double precision);
