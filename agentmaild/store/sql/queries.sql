-- The store's named queries, each written once. Each block starts with "-- name: <name>".
-- Parameters are named (:name); the loader (store/queries.py) gives SQLite this text as it is
-- and PostgreSQL the same text with psycopg's placeholders. A query whose PostgreSQL form truly
-- differs (INDEXED BY, json_each, rowid order, row locks) is overridden, under the same name, in
-- dialect/postgres.sql, which also holds what only PostgreSQL has (advisory locks, NOTIFY,
-- data-modifying CTEs, the server functions' calls). A nullable filter is written
-- CAST(:x AS type) IS NULL: PostgreSQL must know the type of a parameter it sees only as NULL.

-- name: insert_message
INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority, thread_id,
                      payload, read, created_at, broadcast_id)
VALUES (:id, :from_agent, :to_agent, :subject, :body, :type, :priority, :thread_id,
        :payload, 0, :created_at, :broadcast_id);

-- name: get_message
SELECT * FROM messages WHERE id = :id;

-- name: unread_count_reaches
-- 1 when the recipient already holds at least :cap unread messages (walks at most :cap index rows).
SELECT 1 FROM messages WHERE to_agent = :to AND read = 0 LIMIT 1 OFFSET :cap - 1;

-- name: send_probe
-- A one-message send's three reads before it writes, in one statement: the earlier send it
-- would collapse into (NULL when none, or :digest NULL), the recipient's state (NULL when
-- unregistered, or :to NULL), and 1 when :cap_to already holds :cap unread (:cap_to NULL: no cap).
-- (PostgreSQL's common send is one call of am_send_one instead: send_one, dialect/postgres.sql.)
SELECT (SELECT message_ids FROM am_recent_sends WHERE digest = :digest AND at > :since)
         AS earlier_ids,
       (SELECT state FROM am_agents WHERE name = :to) AS state,
       (SELECT 1 FROM messages WHERE to_agent = :cap_to AND read = 0 LIMIT 1 OFFSET :cap - 1)
         AS at_cap;

-- name: rate_count
SELECT count(*) AS n FROM am_rate_log WHERE from_agent = :from AND to_agent = :to AND at > :since;

-- name: rate_insert
INSERT INTO am_rate_log (from_agent, to_agent, at) VALUES (:from, :to, :at);

-- name: rate_trim
DELETE FROM am_rate_log WHERE at <= :before;

-- name: rate_reset
DELETE FROM am_rate_log WHERE from_agent = :from AND to_agent = :to;

-- name: idem_get
SELECT content_hash, message_ids FROM am_idempotency WHERE sender = :sender AND key = :key;

-- name: idem_put
INSERT INTO am_idempotency (sender, key, content_hash, message_ids, created_at)
VALUES (:sender, :key, :digest, :ids, :stamp);

-- name: idem_drop
DELETE FROM am_idempotency WHERE sender = :sender AND key = :key;

-- name: nudge_put
INSERT INTO am_nudges (agent, message_id, reason, created_at)
VALUES (:agent, :message_id, :reason, :stamp) ON CONFLICT DO NOTHING;

-- name: inbox_all
SELECT * FROM messages WHERE to_agent = :agent ORDER BY created_at, id;

-- name: inbox_unread
SELECT * FROM messages WHERE to_agent = :agent AND read = 0 ORDER BY created_at, id;

-- name: pull_candidates
-- Unread mail the pull side may take: everything but batches the daemon has in flight.
SELECT m.* FROM messages m
WHERE m.to_agent = :agent AND m.read = 0
  AND (m.delivery_id IS NULL
       OR NOT EXISTS (SELECT 1 FROM am_deliveries d
                      WHERE d.id = m.delivery_id AND d.state = 'claimed'))
ORDER BY CASE m.priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         m.created_at, m.id;

-- name: list_messages
-- Newest first; each filter left NULL matches every row (:limit: a count, never NULL).
SELECT * FROM messages
WHERE (CAST(:from_agent AS TEXT) IS NULL OR from_agent = :from_agent)
  AND (CAST(:to_agent AS TEXT) IS NULL OR to_agent = :to_agent)
  AND (CAST(:type AS TEXT) IS NULL OR type = :type)
  AND (CAST(:read AS INTEGER) IS NULL OR read = :read)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: purge_nudges
-- The nudges of the messages purge_messages deletes (same filters: NULL matches every row).
DELETE FROM am_nudges WHERE message_id IN (
  SELECT id FROM messages
  WHERE (CAST(:older AS TEXT) IS NULL OR created_at < :older)
    AND (CAST(:agent AS TEXT) IS NULL OR from_agent = :agent OR to_agent = :agent));

-- name: purge_messages
DELETE FROM messages
WHERE (CAST(:older AS TEXT) IS NULL OR created_at < :older)
  AND (CAST(:agent AS TEXT) IS NULL OR from_agent = :agent OR to_agent = :agent);

-- name: mark_read
-- The pull side's ack: :ids (a list, Tx.array) read, when and by whom; returns those that
-- changed (their nudges go with nudge_drop).
UPDATE messages SET read = 1, acked_at = :stamp, acked_by = :by
WHERE id IN (SELECT value FROM json_each(:ids)) AND read = 0
RETURNING id, to_agent;

-- name: nudge_drop
DELETE FROM am_nudges WHERE agent = :agent AND message_id = :message_id;

-- name: unread_among
SELECT id FROM messages WHERE read = 0 AND id IN (SELECT value FROM json_each(:ids));

-- name: thread
SELECT * FROM messages WHERE thread_id = :t OR id = :t ORDER BY created_at, id;

-- name: nudges_for
SELECT n.message_id, n.reason, m.subject, m.priority, m.type, m.from_agent
FROM am_nudges n JOIN messages m ON m.id = n.message_id
WHERE n.agent = :agent AND m.read = 0 ORDER BY n.created_at, n.message_id;

-- name: nudges_clear
DELETE FROM am_nudges WHERE agent = :agent;

-- name: nudge_drop
DELETE FROM am_nudges WHERE agent = :agent AND message_id = :message_id;

-- name: agent_get
SELECT * FROM am_agents WHERE name = :name;

-- name: agent_state
-- On PostgreSQL, read under the recipient's inbox lock, which a change into a refused state or
-- a removal takes too (am_agent_guard, functions.sql): the recipient cannot end before the send
-- commits.
SELECT state FROM am_agents WHERE name = :name;

-- name: registry_version
SELECT version FROM am_registry WHERE id = 1;

-- name: agent_list
SELECT * FROM am_agents ORDER BY name;

-- name: agent_insert
INSERT INTO am_agents (name, capability, parent, state, channel, command, cwd, tmux_target,
                       tmux_socket, preset, session_id, poll_interval_s, settings,
                       turn_state, turn_state_at, created_at, updated_at, host)
VALUES (:name, :capability, :parent, :state, :channel, :command, :cwd, :tmux_target,
        :tmux_socket, :preset, :session_id, :poll_interval_s, :settings,
        :turn_state, :turn_state_at, :created_at, :updated_at, :host);

-- name: agent_get_for_update
-- The agent's row for a read-modify-write: PostgreSQL locks it (dialect); SQLite's writer holds
-- the whole file already.
SELECT * FROM am_agents WHERE name = :name;

-- name: agent_update
-- Every field of AGENT_MUTABLE_FIELDS (store/base.py; a test holds the two together), the turn
-- state's time and the update's.
UPDATE am_agents SET capability = :capability, parent = :parent, channel = :channel,
  command = :command, cwd = :cwd, tmux_target = :tmux_target, tmux_socket = :tmux_socket,
  preset = :preset, session_id = :session_id, poll_interval_s = :poll_interval_s,
  settings = :settings, turn_state = :turn_state, shutdown_requested_at = :shutdown_requested_at,
  turn_state_at = :turn_state_at, updated_at = :updated_at
WHERE name = :name;

-- name: agent_set_state
UPDATE am_agents SET state = :state, updated_at = :stamp WHERE name = :name RETURNING *;

-- name: agent_reached
-- Mail reached the agent (a delivery acked, or it took its mail itself): it is up, no longer
-- booting. Only that one transition; every other state is someone's decision.
UPDATE am_agents SET state = 'working', updated_at = :stamp WHERE name = :agent AND state = 'booting';

-- name: agent_delete
DELETE FROM am_agents WHERE name = :name;

-- name: claim_probe
-- What a claim looks at first, in one statement: a live lease of the agent's (then it claims
-- nothing), a pending redelivery of its own, and whether it is a member of any queue.
SELECT EXISTS (SELECT 1 FROM am_deliveries
               WHERE agent = :agent AND state = 'claimed' AND lease_until > :now) AS active,
       EXISTS (SELECT 1 FROM am_deliveries
               WHERE agent = :agent AND state = 'pending' AND queue IS NULL) AS pending,
       EXISTS (SELECT 1 FROM am_queue_members WHERE agent = :agent) AS in_queue;

-- name: claim_pending_delivery
-- The agent's own pending redelivery (queue deliveries are claimed by queue, below).
SELECT id, attempts FROM am_deliveries WHERE agent = :agent AND state = 'pending' AND queue IS NULL
ORDER BY created_at, id LIMIT 1;

-- name: delivery_unread
SELECT * FROM messages WHERE delivery_id = :id AND read = 0
ORDER BY CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         created_at, id;

-- name: claim_candidates
SELECT * FROM messages WHERE to_agent = :agent AND read = 0 AND delivery_id IS NULL
ORDER BY CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         created_at, id
LIMIT :limit;

-- name: mid_turn_candidates
-- Mail a running turn may take between tool calls (store/midturn.py): unread, in no delivery yet,
-- at least as urgent as the policy's rank (:max_rank, PRIORITY_RANK), never interrupt mail.
SELECT * FROM messages
WHERE to_agent = :agent AND read = 0 AND delivery_id IS NULL AND type <> :interrupt
  AND CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END
      <= :max_rank
ORDER BY CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         created_at, id;

-- name: mid_turn_undo_messages
-- A mid-turn batch the running turn refused (turn/steer answered an error): its mail is in no
-- delivery again, for the turn's end.
UPDATE messages SET delivery_id = NULL WHERE delivery_id = :id AND read = 0;

-- name: mid_turn_undo_delivery
DELETE FROM am_deliveries WHERE id = :id AND state = 'claimed';

-- name: mid_turn_renew
-- A mid-turn batch held to the turn's end (Gemini CLI): its lease goes on while it is the first
-- claim of it (attempts = 1: never a redelivery the daemon took over after the lease ran out).
UPDATE am_deliveries SET lease_until = :until
WHERE id = :id AND state = 'claimed' AND attempts = 1;

-- name: mid_turn_release
-- A held mid-turn batch whose turn failed: pending again, for the next prompt or a redelivery.
UPDATE am_deliveries SET state = 'pending', lease_until = NULL, updated_at = :stamp
WHERE id = :id AND state = 'claimed' AND attempts = 1;

-- name: delivery_mark_claimed
UPDATE am_deliveries SET state = 'claimed', attempts = attempts + 1, lease_until = :lease_until,
                         updated_at = :stamp
WHERE id = :id RETURNING attempts;

-- name: delivery_insert
INSERT INTO am_deliveries (id, agent, state, attempts, failures, lease_until, created_at, updated_at)
VALUES (:id, :agent, 'claimed', 1, 0, :lease_until, :stamp, :stamp);

-- name: claim_mark
-- The messages a claim chose (:ids, a JSON list) now belong to its delivery: one statement for
-- the whole batch.
UPDATE messages SET delivery_id = :delivery WHERE id IN (SELECT value FROM json_each(:ids));

-- name: delivery_attach
-- An interrupt's mail joins the delivery it interrupts (claimed, the recipient's own), so the
-- turn that redelivers that batch opens with it: unread, addressed to the holder, unclaimed.
UPDATE messages SET delivery_id = :delivery
WHERE id = :id AND read = 0 AND delivery_id IS NULL AND to_agent = :agent
  AND EXISTS (SELECT 1 FROM am_deliveries d
              WHERE d.id = :delivery AND d.agent = :agent AND d.state = 'claimed');

-- name: delivery_set_state
UPDATE am_deliveries SET state = :state, updated_at = :stamp WHERE id = :id;

-- name: message_set_delivery
UPDATE messages SET delivery_id = :delivery WHERE id = :id;

-- name: delivery_ack_messages
-- Every message of the batch not acked yet: the unread ones are read now, by this delivery
-- (acked_by names it, so a read mark points at the batch that carried it); the ones another tool
-- marked read meanwhile (`ov mail check` sets read = 1 and nothing else) are recorded as read
-- elsewhere. (SET reads the old values: the CASE sees read as it was.)
UPDATE messages SET acked_by = CASE WHEN read = 0 THEN :by ELSE 'elsewhere' END, read = 1,
                    acked_at = :stamp
WHERE delivery_id = :by AND (read = 0 OR acked_by IS NULL)
RETURNING id, to_agent, acked_by;

-- name: delivery_ack_read_elsewhere
-- Messages of the batch another tool marked read meanwhile: read elsewhere, not by this batch.
UPDATE messages SET acked_by = 'elsewhere', acked_at = :stamp
WHERE delivery_id = :id AND read = 1 AND acked_by IS NULL;

-- name: delivery_close
UPDATE am_deliveries SET state = 'acked', failures = 0, lease_until = NULL, updated_at = :stamp
WHERE id = :id AND state = 'claimed'
RETURNING agent;

-- name: delivery_extend_lease
UPDATE am_deliveries SET lease_until = :until WHERE id = :id AND state = 'claimed';

-- name: delivery_release
UPDATE am_deliveries
SET state = CASE WHEN failures + :count >= :max_attempts THEN 'dead' ELSE 'pending' END,
    failures = failures + :count, lease_until = NULL, last_error = :error, updated_at = :now
WHERE id = :id AND state = 'claimed'
RETURNING state, failures;

-- name: deliveries_expired
UPDATE am_deliveries SET state = 'pending', lease_until = NULL, updated_at = :stamp
WHERE state = 'claimed' AND (CAST(:agent AS text) IS NULL OR agent = :agent)
  AND (lease_until <= :now OR (:everything AND (CAST(:host AS text) IS NULL OR EXISTS
  (SELECT 1 FROM am_agents a WHERE a.name = am_deliveries.agent
     AND (a.host IS NULL OR a.host = :host)))))
RETURNING id, agent;

-- name: deliveries_orphaned_delete
-- Deliveries left with no message at all (after a purge): history nobody can act on.
DELETE FROM am_deliveries WHERE state <> 'claimed' AND NOT EXISTS
  (SELECT 1 FROM messages m WHERE m.delivery_id = am_deliveries.id);

-- name: dead_list
-- A dead letter whose messages another tool deleted (`ov mail purge`) is nothing to retry.
SELECT * FROM am_deliveries d
WHERE d.state = 'dead' AND (CAST(:agent AS text) IS NULL OR d.agent = :agent)
  AND EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id)
ORDER BY d.updated_at, d.id;

-- name: delivery_message_ids
SELECT id FROM messages WHERE delivery_id = :id ORDER BY created_at, id;

-- name: retry_dead
UPDATE am_deliveries SET state = 'pending', failures = 0, updated_at = :now
WHERE state = 'dead' AND (CAST(:agent AS text) IS NULL OR agent = :agent)
  AND (CAST(:id AS text) IS NULL OR id = :id)
RETURNING id;

-- name: pending_agents
-- Agents with mail to claim: addressed to them, or to a queue they are a member of.
SELECT DISTINCT m.to_agent FROM messages m INDEXED BY am_idx_unread
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
SELECT to_agent, count(*) AS n FROM messages INDEXED BY am_idx_unread WHERE read = 0
GROUP BY to_agent;

-- name: count_deliveries
-- A claim is in flight until settled; a dead letter counts while it has messages to retry.
SELECT agent, state, count(*) AS n FROM am_deliveries d
WHERE state = 'claimed'
   OR (state = 'dead' AND EXISTS (SELECT 1 FROM messages m WHERE m.delivery_id = d.id))
GROUP BY agent, state;

-- name: count_messages
SELECT count(*) AS total, count(*) FILTER (WHERE read = 0) AS unread FROM messages;

-- name: orphans_nudges_delete
-- Housekeeping after messages were deleted by any tool (`ov mail purge` knows no am_* table).
DELETE FROM am_nudges WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = am_nudges.message_id);

-- name: orphans_idempotency_delete
DELETE FROM am_idempotency WHERE NOT EXISTS
  (SELECT 1 FROM json_each(am_idempotency.message_ids) j JOIN messages m ON m.id = j.value);

-- name: proc_record
INSERT INTO am_agent_procs (pid, start_time, pgid, agent, delivery_id, daemon_pid, started_at)
VALUES (:pid, :start_time, :pgid, :agent, :delivery_id, :daemon_pid, :started_at)
ON CONFLICT (pid, start_time) DO UPDATE SET
  pgid = EXCLUDED.pgid, agent = EXCLUDED.agent, delivery_id = EXCLUDED.delivery_id,
  daemon_pid = EXCLUDED.daemon_pid, started_at = EXCLUDED.started_at;

-- name: proc_forget
DELETE FROM am_agent_procs WHERE pid = :pid AND start_time = :start_time;

-- name: proc_list
SELECT * FROM am_agent_procs WHERE (CAST(:agent AS text) IS NULL OR agent = :agent)
ORDER BY started_at, pid;

-- name: attempt_insert
INSERT INTO am_attempts (delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at)
VALUES (:delivery_id, :agent, :message_ids, :attempt, :outcome, :error, :duration_s, :at);

-- name: attempts_list
-- Newest first: rows are written as attempts end, so the rowid orders them by time. :limit NULL:
-- all of them.
SELECT * FROM am_attempts
WHERE (:agent IS NULL OR agent = :agent)
  AND (:since IS NULL OR at >= :since)
  AND (:message IS NULL OR EXISTS (SELECT 1 FROM json_each(message_ids) WHERE value = :message))
ORDER BY id DESC
LIMIT coalesce(:limit, -1);

-- name: attempts_purge
DELETE FROM am_attempts
WHERE (CAST(:older AS double precision) IS NULL OR at < :older)
  AND (CAST(:agent AS text) IS NULL OR agent = :agent);

-- name: token_insert
INSERT INTO am_tokens (id, agent, scopes, hash, created_at, expires_at, revoked_at)
VALUES (:id, :agent, :scopes, :hash, :created_at, :expires_at, :revoked_at);

-- name: token_by_hash
SELECT * FROM am_tokens WHERE hash = :hash;

-- name: token_list
SELECT * FROM am_tokens ORDER BY created_at, id;

-- name: token_revoke
UPDATE am_tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL;

-- name: recent_send_get
SELECT message_ids FROM am_recent_sends WHERE digest = :digest AND at > :since;

-- name: recent_send_put
INSERT OR REPLACE INTO am_recent_sends (digest, message_ids, at) VALUES (:digest, :ids, :at);

-- name: recent_sends_prune
-- Rows go in rowid order (REPLACE re-inserts at the end), so the expired ones are a prefix up to
-- the first row still inside the window (the send just remembered, at the latest): one
-- rowid-ordered scan of what is deleted anyway. (SQLite's; PostgreSQL trims by time.)
DELETE FROM am_recent_sends WHERE rowid <
  (SELECT rowid FROM am_recent_sends WHERE at > :before ORDER BY rowid LIMIT 1);


-- name: thread_hold_get
SELECT messages FROM am_thread_holds WHERE thread_id = :thread AND pair = :pair;

-- name: thread_hold_put
INSERT INTO am_thread_holds (thread_id, pair, messages, escalation_id, held_at)
VALUES (:thread, :pair, :messages, :escalation, :stamp);

-- name: thread_holds_release
DELETE FROM am_thread_holds WHERE thread_id = :thread;

-- name: thread_held_pairs
SELECT pair FROM am_thread_holds WHERE thread_id = :thread;

-- name: thread_log_count
SELECT count(*) AS n FROM am_thread_log WHERE thread_id = :thread AND pair = :pair AND at > :since;

-- name: thread_log_trim
DELETE FROM am_thread_log WHERE thread_id = :thread AND pair = :pair AND at <= :since;

-- name: thread_log_put
INSERT INTO am_thread_log (thread_id, pair, at) VALUES (:thread, :pair, :at);

-- name: thread_log_forget
DELETE FROM am_thread_log WHERE thread_id = :thread;

-- name: counter_bump
INSERT INTO am_counters (name, value) VALUES (:name, :n)
ON CONFLICT (name) DO UPDATE SET value = am_counters.value + EXCLUDED.value;

-- name: counters
SELECT name, value FROM am_counters;

-- name: setting_get
SELECT value FROM am_settings WHERE name = :name;

-- name: setting_put
INSERT INTO am_settings (name, value, updated_at) VALUES (:name, :value, :at)
ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at;

-- name: overdue_unread
-- Unread mail older than its priority's cutoff (an ISO stamp; '' = never), not escalated yet.
SELECT m.* FROM messages m INDEXED BY am_idx_unread
WHERE m.read = 0 AND m.from_agent <> :daemon
  AND m.created_at < CASE m.priority WHEN 'urgent' THEN :urgent WHEN 'high' THEN :high
                                     WHEN 'normal' THEN :normal ELSE :low END
  AND NOT EXISTS (SELECT 1 FROM am_escalated e WHERE e.message_id = m.id)
ORDER BY m.created_at, m.id
LIMIT :limit;

-- name: escalated_put
INSERT INTO am_escalated (message_id, at) VALUES (:id, :at) ON CONFLICT DO NOTHING;

-- name: queue_join
INSERT INTO am_queue_members (queue, agent) VALUES (:queue, :agent) ON CONFLICT DO NOTHING;

-- name: queue_leave
DELETE FROM am_queue_members WHERE queue = :queue AND agent = :agent;

-- name: queue_forget_agent
DELETE FROM am_queue_members WHERE agent = :agent;

-- name: queue_members
SELECT agent FROM am_queue_members WHERE queue = :queue ORDER BY agent;

-- name: queue_members_all
SELECT queue, agent FROM am_queue_members ORDER BY queue, agent;

-- name: queue_taker
-- The agent may take queue work: registered, not completed or zombie, no shutdown requested.
SELECT 1 FROM am_agents
WHERE name = :agent AND state NOT IN ('completed', 'zombie') AND shutdown_requested_at IS NULL;

-- name: queue_turns
-- Per queue of :agent: how many of its other members come before it in the queue's turn — idle
-- (they may take queue work, hold no live lease, and their hooks do not report them in a turn)
-- and served there less recently (never first, then by name).
SELECT q.queue, (
  SELECT count(*) FROM am_queue_members r JOIN am_agents a ON a.name = r.agent
  WHERE r.queue = q.queue AND r.agent <> q.agent
    AND a.state NOT IN ('completed', 'zombie') AND a.shutdown_requested_at IS NULL
    AND (a.turn_state IS NULL OR a.turn_state <> 'busy')
    AND NOT EXISTS (SELECT 1 FROM am_deliveries d
                    WHERE d.agent = r.agent AND d.state = 'claimed' AND d.lease_until > :now)
    AND (coalesce(r.served_at, -1) < coalesce(q.served_at, -1)
         OR (coalesce(r.served_at, -1) = coalesce(q.served_at, -1) AND r.agent < q.agent))
) AS ahead
FROM am_queue_members q WHERE q.agent = :agent;

-- name: queue_waiting
-- The work waiting in :queue (never claimed, or given back), each part counted up to :cap.
SELECT (SELECT count(*) FROM (SELECT 1 FROM messages
                              WHERE to_agent = 'queue:' || :queue AND read = 0
                                AND delivery_id IS NULL LIMIT :cap) AS fresh)
     + (SELECT count(*) FROM (SELECT 1 FROM am_deliveries
                              WHERE queue = :queue AND state = 'pending' LIMIT :cap) AS back) AS n;

-- name: queue_stale
-- 1 when some work in :queue has waited since :since or longer: any member may take it now.
SELECT 1 FROM messages
WHERE to_agent = 'queue:' || :queue AND read = 0 AND delivery_id IS NULL AND created_at <= :since
UNION ALL
SELECT 1 FROM am_deliveries WHERE queue = :queue AND state = 'pending' AND updated_at <= :since
LIMIT 1;

-- name: queue_served
UPDATE am_queue_members SET served_at = :now WHERE queue = :queue AND agent = :agent;

-- name: claim_pending_queue_delivery
-- The oldest delivery given back to one of :queues (a JSON list: the member's queues where it is
-- its turn).
SELECT id, queue FROM am_deliveries
WHERE state = 'pending' AND queue IN (SELECT value FROM json_each(:queues))
ORDER BY created_at, id LIMIT 1;

-- name: delivery_take_over
-- A queue delivery claimed again, by whichever member: same id, one more attempt.
UPDATE am_deliveries SET state = 'claimed', agent = :agent, attempts = attempts + 1,
                         lease_until = :lease_until, updated_at = :stamp
WHERE id = :id RETURNING attempts;

-- name: claim_queue_candidate
SELECT m.* FROM messages m
WHERE m.read = 0 AND m.delivery_id IS NULL
  AND m.to_agent IN (SELECT 'queue:' || value FROM json_each(:queues))
ORDER BY CASE m.priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         m.created_at, m.id
LIMIT 1;

-- name: delivery_insert_queue
INSERT INTO am_deliveries (id, agent, state, attempts, failures, lease_until, created_at,
                           updated_at, queue)
VALUES (:id, :agent, 'claimed', 1, 0, :lease_until, :stamp, :stamp, :queue);

-- name: queue_depths
-- Per queue: mail waiting for a member (never claimed, or given back for a redelivery).
SELECT substr(m.to_agent, 7) AS queue, count(*) AS n FROM messages m
WHERE m.to_agent >= 'queue:' AND m.to_agent < 'queue;' AND m.read = 0
  AND (m.delivery_id IS NULL
       OR EXISTS (SELECT 1 FROM am_deliveries d WHERE d.id = m.delivery_id AND d.state = 'pending'))
GROUP BY m.to_agent;

-- name: queue_held
SELECT queue, agent, id, attempts FROM am_deliveries
WHERE state = 'claimed' AND queue IS NOT NULL ORDER BY queue, agent, id;

-- Trust domains.
-- name: peer_insert
INSERT INTO am_peers (name, public_key, key_id, url, created_at)
VALUES (:name, :public_key, :key_id, :url, :created_at);

-- name: peer_get
SELECT * FROM am_peers WHERE name = :name;

-- name: peer_list
SELECT * FROM am_peers ORDER BY name;

-- name: peer_delete
DELETE FROM am_peers WHERE name = :name;

-- name: nonce_prune
DELETE FROM am_nonces WHERE expires_at < :now;

-- name: nonce_claim
INSERT INTO am_nonces (nonce, peer, expires_at) VALUES (:nonce, :peer, :expires_at)
ON CONFLICT (nonce) DO NOTHING;

-- name: peer_origin_insert
INSERT INTO am_peer_messages (message_id, peer, key_id, origin_id)
VALUES (:message_id, :peer, :key_id, :origin_id) ON CONFLICT DO NOTHING;

-- name: peer_origin_get
SELECT * FROM am_peer_messages WHERE message_id = :id;

-- name: relayed_insert
INSERT INTO am_relayed (message_id, peer, relayed_at) VALUES (:message_id, :peer, :at)
ON CONFLICT (message_id) DO NOTHING;

-- name: relay_pending
SELECT * FROM messages
WHERE to_agent LIKE 'peer:%' AND id NOT IN (SELECT message_id FROM am_relayed)
ORDER BY created_at, id LIMIT :limit;

-- name: usage_insert
-- What one attempt cost (store/usage.py); written beside its am_attempts row.
INSERT INTO am_usage (delivery_id, attempt, agent, thread_id, tokens_in, tokens_out, cost_usd, at)
VALUES (:delivery_id, :attempt, :agent, :thread_id, :tokens_in, :tokens_out, :cost_usd, :at);

-- name: usage_since
-- The usage rows of a history listing's window (its oldest attempt on), newest first.
SELECT delivery_id, attempt, agent, thread_id, tokens_in, tokens_out, cost_usd, at FROM am_usage
WHERE at >= :since AND (CAST(:agent AS text) IS NULL OR agent = :agent)
ORDER BY at DESC LIMIT :limit;

-- name: usage_by_agent
SELECT agent AS name, count(*) AS turns, sum(tokens_in) AS tokens_in,
       sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd
FROM am_usage WHERE at >= :since GROUP BY agent ORDER BY agent LIMIT 500;

-- name: usage_agent_cost
SELECT coalesce(sum(cost_usd), 0) AS cost_usd FROM am_usage WHERE agent = :agent AND at >= :since;

-- name: usage_purge
DELETE FROM am_usage
WHERE (CAST(:older AS double precision) IS NULL OR at < :older)
  AND (CAST(:agent AS text) IS NULL OR agent = :agent);

-- name: budget_get
SELECT agent, day, raised_usd, reset_at FROM am_budgets WHERE agent = :agent;

-- name: budget_put
INSERT INTO am_budgets (agent, day, raised_usd, reset_at, updated_at)
VALUES (:agent, :day, :raised_usd, :reset_at, :at)
ON CONFLICT (agent) DO UPDATE SET day = EXCLUDED.day, raised_usd = EXCLUDED.raised_usd,
  reset_at = EXCLUDED.reset_at, updated_at = EXCLUDED.updated_at;

-- name: usage_by_thread
SELECT thread_id AS name, count(*) AS turns, sum(tokens_in) AS tokens_in,
       sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd
FROM am_usage WHERE at >= :since AND thread_id IS NOT NULL GROUP BY thread_id
ORDER BY sum(coalesce(cost_usd, 0)) DESC, sum(tokens_in + tokens_out) DESC LIMIT :limit;
