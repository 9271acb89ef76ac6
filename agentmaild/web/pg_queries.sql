-- The dashboard's reads on a PostgreSQL store, on its own read-only connection: the queries of
-- queries.sql with PostgreSQL's spellings (no rowid: "newest" is (created_at, id), indexed by
-- schema step 5), and full-text search over all mail (the GIN index of schema step 5).

-- name: agents
SELECT name, channel, state, host, turn_state, turn_state_at FROM am_agents ORDER BY name LIMIT 500;

-- name: unread
SELECT to_agent, count(*) AS n FROM messages WHERE read = 0 GROUP BY to_agent;

-- name: agent_deliveries
SELECT id, state, attempts, failures, last_error, updated_at, lease_until FROM am_deliveries
WHERE agent = %s AND state IN ('claimed', 'dead') ORDER BY updated_at DESC LIMIT 50;

-- name: last_attempt
SELECT delivery_id, attempt, outcome, error, duration_s, at FROM am_attempts
WHERE agent = %s ORDER BY at DESC LIMIT 1;

-- name: in_flight
SELECT id, agent, attempts, updated_at, lease_until FROM am_deliveries
WHERE agent = %s AND state = 'claimed' ORDER BY updated_at DESC LIMIT 20;

-- name: attempts_all
SELECT id, delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at
FROM am_attempts ORDER BY id DESC LIMIT %s;

-- name: attempts_agent
SELECT id, delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at
FROM am_attempts WHERE agent = %s ORDER BY at DESC, id DESC LIMIT %s;

-- name: spark
SELECT floor((at - %s) / 60)::integer AS minute, count(*) AS n, avg(duration_s) AS mean,
       count(*) FILTER (WHERE outcome NOT IN ('acked', 'released')) AS failed
FROM am_attempts WHERE agent = %s AND at >= %s GROUP BY 1;

-- name: threads
SELECT coalesce(thread_id, id) AS thread, count(*) AS n, max(created_at) AS last,
       min(subject) AS subject, min(from_agent) AS from_agent, min(to_agent) AS to_agent,
       count(*) FILTER (WHERE read = 0) AS unread
FROM (SELECT * FROM messages ORDER BY created_at DESC, id DESC LIMIT %s) newest
GROUP BY 1 ORDER BY last DESC LIMIT %s;

-- name: thread
SELECT * FROM messages WHERE thread_id = %s OR id = %s ORDER BY created_at, id LIMIT 500;

-- name: delivery
SELECT id, agent, state, attempts, failures, last_error, created_at, updated_at
FROM am_deliveries WHERE id = %s;

-- name: delivery_attempts
SELECT attempt, outcome, error, duration_s, at FROM am_attempts WHERE delivery_id = %s
ORDER BY id LIMIT 100;

-- name: dead
SELECT id, agent, attempts, failures, last_error, updated_at FROM am_deliveries
WHERE state = 'dead' ORDER BY updated_at DESC, id LIMIT %s;

-- name: delivery_messages
SELECT id, subject, from_agent, coalesce(thread_id, id) AS thread FROM messages
WHERE delivery_id = %s ORDER BY created_at, id LIMIT 50;

-- name: search
WITH q AS (SELECT websearch_to_tsquery('simple', %s) AS q)
SELECT m.id, m.from_agent, m.to_agent, m.subject, m.created_at,
       coalesce(m.thread_id, m.id) AS thread,
       ts_headline('simple', m.body, q.q, 'StartSel=' || chr(1) || ', StopSel=' || chr(2)
                   || ', MaxWords=14, MinWords=6, FragmentDelimiter=" … ", MaxFragments=2')
         AS snippet
FROM messages m, q
WHERE to_tsvector('simple', m.subject || ' ' || m.body) @@ q.q
ORDER BY m.created_at DESC, m.id DESC LIMIT %s;
