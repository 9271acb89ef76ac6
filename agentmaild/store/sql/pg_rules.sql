-- Named queries of the PostgreSQL store for the schema-2 parts (= SQLite schema 4): the HTTP
-- API's tokens, Overstory-mode housekeeping, the team rules and work queues. Same format and
-- names as pg_queries.sql (loaded into the same PQ); the SQLite queries of the same name in
-- queries.sql say the same thing.

-- name: token_insert
INSERT INTO am_tokens (id, agent, scopes, hash, created_at, expires_at, revoked_at)
VALUES (%(id)s, %(agent)s, %(scopes)s, %(hash)s, %(created_at)s, %(expires_at)s,
        %(revoked_at)s);

-- name: token_by_hash
SELECT * FROM am_tokens WHERE hash = %(hash)s;

-- name: token_list
SELECT * FROM am_tokens ORDER BY created_at, id;

-- name: token_revoke
UPDATE am_tokens SET revoked_at = %(now)s WHERE id = %(id)s AND revoked_at IS NULL;

-- name: idem_drop
DELETE FROM am_idempotency WHERE sender = %(sender)s AND key = %(key)s;

-- name: orphans_nudges_delete
DELETE FROM am_nudges n WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = n.message_id);

-- name: orphans_idempotency_delete
DELETE FROM am_idempotency i WHERE NOT EXISTS
  (SELECT 1 FROM jsonb_array_elements_text(i.message_ids) j(id)
   JOIN messages m ON m.id = j.id);

-- name: counter_bump
INSERT INTO am_counters (name, value) VALUES (%(name)s, %(n)s)
ON CONFLICT (name) DO UPDATE SET value = am_counters.value + EXCLUDED.value;

-- name: counters
SELECT name, value FROM am_counters;

-- name: recent_send_get
SELECT message_ids FROM am_recent_sends WHERE digest = %(digest)s AND at > %(since)s;

-- name: recent_sends_trim
DELETE FROM am_recent_sends WHERE at <= %(before)s;

-- name: recent_send_put
INSERT INTO am_recent_sends (digest, message_ids, at) VALUES (%(digest)s, %(ids)s, %(at)s)
ON CONFLICT (digest) DO UPDATE SET message_ids = EXCLUDED.message_ids, at = EXCLUDED.at;

-- name: thread_hold_get
SELECT messages FROM am_thread_holds WHERE thread_id = %(thread)s AND pair = %(pair)s;

-- name: thread_log_trim
DELETE FROM am_thread_log WHERE thread_id = %(thread)s AND pair = %(pair)s AND at <= %(since)s;

-- name: thread_log_count
SELECT count(*) AS n FROM am_thread_log
WHERE thread_id = %(thread)s AND pair = %(pair)s AND at > %(since)s;

-- name: thread_log_put
INSERT INTO am_thread_log (thread_id, pair, at) VALUES (%(thread)s, %(pair)s, %(at)s);

-- name: thread_hold_put
INSERT INTO am_thread_holds (thread_id, pair, messages, escalation_id, held_at)
VALUES (%(thread)s, %(pair)s, %(messages)s, %(escalation)s, %(stamp)s);

-- name: thread_log_forget
DELETE FROM am_thread_log WHERE thread_id = %(thread)s;

-- name: thread_holds_release
DELETE FROM am_thread_holds WHERE thread_id = %(thread)s;

-- name: overdue_unread
-- Unread mail older than its priority's cutoff (an ISO stamp; '' = never), not escalated yet.
SELECT m.* FROM messages m
WHERE m.read = 0 AND m.from_agent <> %(daemon)s
  AND m.created_at < CASE m.priority WHEN 'urgent' THEN %(urgent)s WHEN 'high' THEN %(high)s
                                     WHEN 'normal' THEN %(normal)s ELSE %(low)s END
  AND NOT EXISTS (SELECT 1 FROM am_escalated e WHERE e.message_id = m.id)
ORDER BY m.created_at, m.id
LIMIT %(limit)s;

-- name: escalated_put
INSERT INTO am_escalated (message_id, at) VALUES (%(id)s, %(at)s) ON CONFLICT DO NOTHING;

-- name: queue_join
INSERT INTO am_queue_members (queue, agent) VALUES (%(queue)s, %(agent)s) ON CONFLICT DO NOTHING;

-- name: queue_leave
DELETE FROM am_queue_members WHERE queue = %(queue)s AND agent = %(agent)s;

-- name: queue_forget_agent
DELETE FROM am_queue_members WHERE agent = %(agent)s;

-- name: queue_members
SELECT agent FROM am_queue_members WHERE queue = %(queue)s ORDER BY agent;

-- name: queue_members_all
SELECT queue, agent FROM am_queue_members ORDER BY queue, agent;

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

-- name: claim_active
SELECT 1 FROM am_deliveries
WHERE agent = %(agent)s AND state = 'claimed' AND lease_until > %(now)s LIMIT 1;

-- name: queue_taker
-- The agent may take queue work: registered, not completed or zombie, no shutdown requested.
SELECT 1 FROM am_agents
WHERE name = %(agent)s AND state NOT IN ('completed', 'zombie')
  AND shutdown_requested_at IS NULL;

-- name: claim_pending_queue_delivery
-- Rows another member's claim is working on are passed over, never waited for.
SELECT id FROM am_deliveries
WHERE state = 'pending' AND queue IN (SELECT queue FROM am_queue_members WHERE agent = %(agent)s)
ORDER BY created_at, id LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: delivery_set_state
UPDATE am_deliveries SET state = %(state)s, updated_at = %(stamp)s WHERE id = %(id)s;

-- name: delivery_take_over
-- A queue delivery claimed again, by whichever member: same id, one more attempt.
UPDATE am_deliveries SET state = 'claimed', agent = %(agent)s, attempts = attempts + 1,
                         lease_until = %(lease_until)s, updated_at = %(stamp)s
WHERE id = %(id)s RETURNING attempts;

-- name: claim_queue_candidate
SELECT m.* FROM messages m
WHERE m.read = 0 AND m.delivery_id IS NULL
  AND m.to_agent IN (SELECT 'queue:' || q.queue FROM am_queue_members q WHERE q.agent = %(agent)s)
ORDER BY CASE m.priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 ELSE 3 END,
         m.created_at, m.id
LIMIT 1
FOR UPDATE OF m SKIP LOCKED;

-- name: delivery_insert_queue
INSERT INTO am_deliveries (id, agent, state, attempts, failures, lease_until, created_at,
                           updated_at, queue)
VALUES (%(id)s, %(agent)s, 'claimed', 1, 0, %(lease_until)s, %(stamp)s, %(stamp)s, %(queue)s);

-- name: message_set_delivery
UPDATE messages SET delivery_id = %(delivery)s WHERE id = %(id)s;

-- name: delivery_ack_read_elsewhere
-- Messages of the batch another tool marked read meanwhile: read elsewhere, not by this batch.
UPDATE messages SET acked_by = 'elsewhere', acked_at = %(stamp)s
WHERE delivery_id = %(id)s AND read = 1 AND acked_by IS NULL;

-- name: delivery_close
UPDATE am_deliveries SET state = 'acked', failures = 0, lease_until = NULL,
                         updated_at = %(stamp)s
WHERE id = %(id)s AND state = 'claimed'
RETURNING agent;
