-- The cold paths' own queries (the hook's port, check --inject, the tmux channel's reads), written
-- once for both stores with :name placeholders (store/queries.py; translated for PostgreSQL at
-- load). The mail they take goes through queries.sql's pull_candidates and nudges_for.

-- name: set_turn_state
-- Claude's session id: interactive agents (tmux, pull) always take the latest one, so /clear is
-- followed; daemon-owned sessions (spawn, stdin) only fill an empty one.
UPDATE am_agents SET turn_state = :state, turn_state_at = :at, session_id = CASE
  WHEN :sid = '' THEN session_id
  WHEN channel IN ('spawn', 'stdin') THEN COALESCE(session_id, :sid) ELSE :sid END
WHERE name = :agent AND (CAST(:only_from AS TEXT) IS NULL OR turn_state = :only_from);

-- name: agent_settings
SELECT settings FROM am_agents WHERE name = :agent;

-- name: turn_state
SELECT turn_state, turn_state_at FROM am_agents WHERE name = :agent;

-- name: seen_insert
INSERT INTO am_prompt_seen (delivery_id, agent, session_id, at)
VALUES (:delivery_id, :agent, :sid, :at) ON CONFLICT (delivery_id) DO NOTHING;

-- name: seen_prune
DELETE FROM am_prompt_seen WHERE at < :before;

-- name: seen
SELECT 1 AS seen FROM am_prompt_seen WHERE delivery_id = :delivery_id;

-- name: has_unread
SELECT 1 AS unread FROM messages WHERE to_agent = :agent AND read = 0 LIMIT 1;

-- name: unread_count
SELECT count(*) AS n FROM messages WHERE to_agent = :agent AND read = 0;

-- name: known
-- Registered, or ever mailed: a name check --inject answers for rather than refusing.
SELECT (EXISTS (SELECT 1 FROM am_agents WHERE name = :agent)
        OR EXISTS (SELECT 1 FROM messages WHERE to_agent = :agent)) AS known;

-- name: message_read
SELECT read FROM messages WHERE id = :id;

-- name: nudge_ours
SELECT 1 FROM am_nudges WHERE agent = :agent AND message_id = :id;
