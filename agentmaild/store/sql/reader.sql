-- The dashboard's reads (store/reader.py), on its own read-only connection. Every query is bounded
-- (LIMIT, a time window, or one agent through an index); none writes. Written once with :name
-- placeholders (store/queries.py); "x@postgres" is PostgreSQL's spelling of x where the two truly
-- differ: no rowid there ("newest" is (created_at, id), indexed by schema step 5), and full-text
-- search over all mail (the GIN index of schema step 5).

-- name: agents
SELECT name, channel, state, host, parent, turn_state, turn_state_at FROM am_agents ORDER BY name LIMIT 500;

-- name: unread
SELECT to_agent, count(*) AS n FROM messages INDEXED BY am_idx_unread WHERE read = 0 GROUP BY to_agent;

-- name: unread@postgres
SELECT to_agent, count(*) AS n FROM messages WHERE read = 0 GROUP BY to_agent;

-- name: agent_deliveries
SELECT id, state, attempts, failures, last_error, updated_at, lease_until FROM am_deliveries
WHERE agent = :agent AND state IN ('claimed', 'dead') ORDER BY updated_at DESC LIMIT 50;

-- name: last_attempt
SELECT delivery_id, attempt, outcome, error, duration_s, at FROM am_attempts
WHERE agent = :agent ORDER BY at DESC LIMIT 1;

-- name: in_flight
SELECT id, agent, attempts, updated_at, lease_until FROM am_deliveries
WHERE agent = :agent AND state = 'claimed' ORDER BY updated_at DESC LIMIT 20;

-- name: attempts_all
SELECT id, delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at
FROM am_attempts ORDER BY id DESC LIMIT :limit;

-- name: attempts_agent
SELECT id, delivery_id, agent, message_ids, attempt, outcome, error, duration_s, at
FROM am_attempts WHERE agent = :agent ORDER BY at DESC, id DESC LIMIT :limit;

-- name: spark
SELECT CAST((at - :start) / 60 AS INTEGER) AS minute, count(*) AS n, avg(duration_s) AS mean,
       sum(outcome NOT IN ('acked', 'released', 'mid-turn')) AS failed
FROM am_attempts WHERE agent = :agent AND at >= :start GROUP BY minute;

-- name: spark@postgres
SELECT floor((at - :start) / 60)::integer AS minute, count(*) AS n, avg(duration_s) AS mean,
       count(*) FILTER (WHERE outcome NOT IN ('acked', 'released', 'mid-turn')) AS failed
FROM am_attempts WHERE agent = :agent AND at >= :start GROUP BY 1;

-- name: threads
SELECT coalesce(thread_id, id) AS thread, count(*) AS n, max(created_at) AS last, subject,
       from_agent, to_agent, sum(read = 0) AS unread
FROM (SELECT * FROM messages ORDER BY rowid DESC LIMIT :window)
GROUP BY thread ORDER BY last DESC LIMIT :limit;

-- name: threads@postgres
SELECT coalesce(thread_id, id) AS thread, count(*) AS n, max(created_at) AS last,
       min(subject) AS subject, min(from_agent) AS from_agent, min(to_agent) AS to_agent,
       count(*) FILTER (WHERE read = 0) AS unread
FROM (SELECT * FROM messages ORDER BY created_at DESC, id DESC LIMIT :window) newest
GROUP BY 1 ORDER BY last DESC LIMIT :limit;

-- name: thread
SELECT * FROM messages WHERE thread_id = :thread OR id = :thread ORDER BY created_at, id LIMIT 500;

-- name: delivery
SELECT id, agent, state, attempts, failures, last_error, created_at, updated_at
FROM am_deliveries WHERE id = :id;

-- name: delivery_attempts
SELECT attempt, outcome, error, duration_s, at FROM am_attempts WHERE delivery_id = :id
ORDER BY id LIMIT 100;

-- name: dead
SELECT id, agent, attempts, failures, last_error, updated_at FROM am_deliveries
WHERE state = 'dead' ORDER BY updated_at DESC, id LIMIT :limit;

-- name: delivery_messages
SELECT id, subject, from_agent, coalesce(thread_id, id) AS thread FROM messages
WHERE delivery_id = :id ORDER BY created_at, id LIMIT 50;

-- name: agent
SELECT name, capability, parent, state, channel, host, session_id, tmux_target, turn_state,
       turn_state_at, created_at FROM am_agents WHERE name = :agent;

-- name: agent_threads
SELECT coalesce(thread_id, id) AS thread, count(*) AS n, max(created_at) AS last, subject,
       from_agent, to_agent, sum(CASE WHEN read = 0 THEN 1 ELSE 0 END) AS unread
FROM (SELECT * FROM messages ORDER BY rowid DESC LIMIT :window)
WHERE from_agent = :agent OR to_agent = :agent
GROUP BY thread ORDER BY last DESC LIMIT :limit;

-- name: agent_threads@postgres
SELECT coalesce(thread_id, id) AS thread, count(*) AS n, max(created_at) AS last,
       min(subject) AS subject, min(from_agent) AS from_agent, min(to_agent) AS to_agent,
       count(*) FILTER (WHERE read = 0) AS unread
FROM (SELECT * FROM messages ORDER BY created_at DESC, id DESC LIMIT :window) newest
WHERE from_agent = :agent OR to_agent = :agent
GROUP BY 1 ORDER BY last DESC LIMIT :limit;

-- name: graph_edges
-- Who mailed whom since :since, from the newest :window messages (web/graph.py).
SELECT from_agent, to_agent, count(*) AS n,
       sum(CASE WHEN type = 'escalation' THEN 1 ELSE 0 END) AS escalations,
       sum(CASE WHEN delivery_id IS NOT NULL AND delivery_id IN
           (SELECT id FROM am_deliveries WHERE state = 'dead') THEN 1 ELSE 0 END) AS dead
FROM (SELECT from_agent, to_agent, type, delivery_id, created_at FROM messages
      ORDER BY rowid DESC LIMIT :window)
WHERE created_at >= :since GROUP BY from_agent, to_agent ORDER BY n DESC LIMIT :limit;

-- name: graph_edges@postgres
SELECT from_agent, to_agent, count(*) AS n,
       sum(CASE WHEN type = 'escalation' THEN 1 ELSE 0 END) AS escalations,
       sum(CASE WHEN delivery_id IS NOT NULL AND delivery_id IN
           (SELECT id FROM am_deliveries WHERE state = 'dead') THEN 1 ELSE 0 END) AS dead
FROM (SELECT from_agent, to_agent, type, delivery_id, created_at FROM messages
      WHERE created_at >= :since ORDER BY created_at DESC, id DESC LIMIT :window) newest
GROUP BY from_agent, to_agent ORDER BY n DESC LIMIT :limit;

-- name: holds
-- Threads the loop guard holds (a pair past pingpong_max): Needs you, the graph's marks.
SELECT thread_id, pair, messages, escalation_id, held_at FROM am_thread_holds
ORDER BY held_at LIMIT :limit;

-- name: needs_questions
-- Questions to the operator no one has answered yet (rules/ask.find_reply's rule), oldest first.
SELECT q.id, q.from_agent, q.subject, q.body, q.priority, q.created_at,
       coalesce(q.thread_id, q.id) AS thread
FROM messages q
WHERE q.to_agent = :operator AND q.type = 'question' AND NOT EXISTS (
  SELECT 1 FROM messages r WHERE r.thread_id = q.id
    AND r.id != q.id AND r.to_agent = q.from_agent AND r.from_agent != q.from_agent)
ORDER BY q.created_at, q.id LIMIT :limit;

-- name: needs_escalated
-- Mail the long-unread rule escalated (rules/escalate.py) that is still unread, oldest first.
SELECT m.id, m.from_agent, m.to_agent, m.subject, m.type, m.priority, m.created_at, e.at AS escalated_at,
       coalesce(m.thread_id, m.id) AS thread
FROM am_escalated e JOIN messages m ON m.id = e.message_id
WHERE m.read = 0 ORDER BY e.at, m.id LIMIT :limit;

-- name: search
-- SQLite: FTS5 over a TEMP index of the newest mail (store/reader_sqlite.py builds it).
SELECT m.id, m.from_agent, m.to_agent, m.subject, m.created_at, coalesce(m.thread_id, m.id) AS thread,
       snippet(am_search, 1, char(1), char(2), ' … ', 12) AS snippet
FROM temp.am_search s JOIN messages m ON m.id = s.mid
WHERE am_search MATCH :query ORDER BY rank LIMIT :limit;

-- name: search@postgres
-- PostgreSQL full-text search over all mail (websearch_to_tsquery: words, "phrases", -not, or).
WITH q AS (SELECT websearch_to_tsquery('simple', :query) AS q)
SELECT m.id, m.from_agent, m.to_agent, m.subject, m.created_at,
       coalesce(m.thread_id, m.id) AS thread,
       ts_headline('simple', m.body, q.q, 'StartSel=' || chr(1) || ', StopSel=' || chr(2)
                   || ', MaxWords=14, MinWords=6, FragmentDelimiter=" … ", MaxFragments=2')
         AS snippet
FROM messages m, q
WHERE to_tsvector('simple', m.subject || ' ' || m.body) @@ q.q
ORDER BY m.created_at DESC, m.id DESC LIMIT :limit;

-- name: newest_rowid
-- SQLite's search index is rebuilt when this moves (newest rowid, count).
SELECT coalesce(max(rowid), 0), count(*) FROM messages;

-- name: search_index_create
CREATE VIRTUAL TABLE IF NOT EXISTS temp.am_search USING fts5(subject, body, mid UNINDEXED);

-- name: search_index_clear
DELETE FROM temp.am_search;

-- name: search_index_fill
INSERT INTO temp.am_search (subject, body, mid)
SELECT subject, body, id FROM messages ORDER BY rowid DESC LIMIT :window;

-- name: usage_agents
-- What each agent's turns cost since :since (store/usage.py, rules/budget.py).
SELECT agent AS name, count(*) AS turns, sum(tokens_in) AS tokens_in,
       sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd
FROM am_usage WHERE at >= :since GROUP BY agent ORDER BY agent LIMIT 500;

-- name: usage_threads
SELECT thread_id AS thread, count(*) AS turns, sum(tokens_in) AS tokens_in,
       sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd
FROM am_usage WHERE at >= :since AND thread_id IS NOT NULL GROUP BY thread_id
ORDER BY sum(coalesce(cost_usd, 0)) DESC, sum(tokens_in + tokens_out) DESC LIMIT :limit;

-- name: budget_agents
SELECT a.name, a.settings, b.day, b.raised_usd, b.reset_at
FROM am_agents a LEFT JOIN am_budgets b ON b.agent = a.name ORDER BY a.name LIMIT 500;

-- name: budget_rules
SELECT value FROM am_settings WHERE name = 'team_rules';

-- name: usage_agent_cost
SELECT coalesce(sum(cost_usd), 0) AS cost_usd FROM am_usage WHERE agent = :agent AND at >= :since;
