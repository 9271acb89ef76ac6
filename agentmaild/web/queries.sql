-- The dashboard's reads, on its own read-only connection. Every query is bounded (LIMIT, a time
-- window, or one agent through an index); none writes. Named as in store/sql/queries.sql.

-- name: agents
SELECT name, channel, state, host, turn_state, turn_state_at FROM am_agents ORDER BY name LIMIT 500;

-- name: unread
SELECT to_agent, count(*) AS n FROM messages INDEXED BY am_idx_unread WHERE read = 0 GROUP BY to_agent;

-- name: agent_deliveries
SELECT id, state, attempts, failures, last_error, updated_at, lease_until FROM am_deliveries
WHERE agent = ? AND state IN ('claimed', 'dead') ORDER BY updated_at DESC LIMIT 50;

-- name: last_attempt
SELECT delivery_id, attempt, outcome, error, duration_s, at FROM am_attempts
WHERE agent = ? ORDER BY at DESC LIMIT 1;

-- name: in_flight
SELECT id, agent, attempts, updated_at, lease_until FROM am_deliveries
WHERE agent = ? AND state = 'claimed' ORDER BY updated_at DESC LIMIT 20;

-- name: attempts_all
SELECT id, delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at
FROM am_attempts ORDER BY id DESC LIMIT ?;

-- name: attempts_agent
SELECT id, delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at
FROM am_attempts WHERE agent = ? ORDER BY at DESC, id DESC LIMIT ?;

-- name: spark
SELECT CAST((at - ?) / 60 AS INTEGER) AS minute, count(*) AS n, avg(duration_s) AS mean,
       sum(outcome != 'acked' AND outcome != 'released') AS failed
FROM am_attempts WHERE agent = ? AND at >= ? GROUP BY minute;

-- name: threads
SELECT coalesce(thread_id, id) AS thread, count(*) AS n, max(created_at) AS last, subject,
       from_agent, to_agent, sum(read = 0) AS unread
FROM (SELECT * FROM messages ORDER BY rowid DESC LIMIT ?)
GROUP BY thread ORDER BY last DESC LIMIT ?;

-- name: thread
SELECT * FROM messages WHERE thread_id = ? OR id = ? ORDER BY created_at, id LIMIT 500;

-- name: delivery
SELECT id, agent, state, attempts, failures, last_error, created_at, updated_at
FROM am_deliveries WHERE id = ?;

-- name: delivery_attempts
SELECT attempt, outcome, error, duration_s, at FROM am_attempts WHERE delivery_id = ?
ORDER BY id LIMIT 100;

-- name: dead
SELECT id, agent, attempts, failures, last_error, updated_at FROM am_deliveries
WHERE state = 'dead' ORDER BY updated_at DESC, id LIMIT ?;

-- name: delivery_messages
SELECT id, subject, from_agent, coalesce(thread_id, id) AS thread FROM messages
WHERE delivery_id = ? ORDER BY created_at, id LIMIT 50;

-- name: newest_rowid
SELECT coalesce(max(rowid), 0), count(*) FROM messages;

-- name: search_index_create
CREATE VIRTUAL TABLE IF NOT EXISTS temp.am_search USING fts5(subject, body, mid UNINDEXED);

-- name: search_index_clear
DELETE FROM temp.am_search;

-- name: search_index_fill
INSERT INTO temp.am_search (subject, body, mid)
SELECT subject, body, id FROM messages ORDER BY rowid DESC LIMIT ?;

-- name: search
SELECT m.id, m.from_agent, m.to_agent, m.subject, m.created_at, coalesce(m.thread_id, m.id),
       snippet(am_search, 1, char(1), char(2), ' … ', 12)
FROM temp.am_search s JOIN messages m ON m.id = s.mid
WHERE am_search MATCH ? ORDER BY rank LIMIT ?;
