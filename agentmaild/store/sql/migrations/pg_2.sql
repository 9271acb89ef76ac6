-- agentmaild's PostgreSQL schema, version 2 (= the SQLite schema 4): the HTTP API's tokens and
-- the team rules' tables and columns. Applied on top of version 1 by postgres_migrate, in its
-- one transaction; every statement is idempotent. Same conventions as pg_1.sql (COLLATE "C"
-- for compared text, jsonb for the id lists agentmaild writes and re-reads).

-- Bearer tokens of the HTTP API: only the SHA-256 of a token is kept (unix seconds).
CREATE TABLE IF NOT EXISTS am_tokens (
  id text COLLATE "C" PRIMARY KEY,
  agent text COLLATE "C" NOT NULL,
  scopes text NOT NULL,
  hash text COLLATE "C" NOT NULL UNIQUE,
  created_at double precision NOT NULL,
  expires_at double precision,
  revoked_at double precision
)
-- ;
-- The loop guard's memory: the last send of each content digest (duplicate collapse), the
-- messages each pair exchanged per thread (ping-pong cap), the threads it holds, the counters.
CREATE TABLE IF NOT EXISTS am_recent_sends (
  digest text COLLATE "C" PRIMARY KEY,
  message_ids jsonb NOT NULL,
  at double precision NOT NULL
)
-- ;
CREATE INDEX IF NOT EXISTS am_idx_recent_sends_at ON am_recent_sends (at)
-- ;
CREATE TABLE IF NOT EXISTS am_thread_log (
  thread_id text COLLATE "C" NOT NULL,
  pair text COLLATE "C" NOT NULL,
  at double precision NOT NULL
)
-- ;
CREATE INDEX IF NOT EXISTS am_idx_thread_log ON am_thread_log (thread_id, pair, at)
-- ;
CREATE TABLE IF NOT EXISTS am_thread_holds (
  thread_id text COLLATE "C" NOT NULL,
  pair text COLLATE "C" NOT NULL,
  messages integer NOT NULL,
  escalation_id text COLLATE "C",
  held_at text COLLATE "C" NOT NULL,
  PRIMARY KEY (thread_id, pair)
)
-- ;
CREATE TABLE IF NOT EXISTS am_counters (
  name text COLLATE "C" PRIMARY KEY,
  value bigint NOT NULL
)
-- ;
-- Messages the long-unread rule has escalated: at most one escalation per message.
CREATE TABLE IF NOT EXISTS am_escalated (
  message_id text COLLATE "C" PRIMARY KEY,
  at double precision NOT NULL
)
-- ;
-- Work-queue membership; am_deliveries.queue names the queue of a delivery of queue mail.
CREATE TABLE IF NOT EXISTS am_queue_members (
  queue text COLLATE "C" NOT NULL,
  agent text COLLATE "C" NOT NULL,
  PRIMARY KEY (queue, agent)
)
-- ;
CREATE INDEX IF NOT EXISTS am_idx_queue_members_agent ON am_queue_members (agent)
-- ;
ALTER TABLE am_agents ADD COLUMN IF NOT EXISTS shutdown_requested_at text COLLATE "C"
-- ;
ALTER TABLE am_deliveries ADD COLUMN IF NOT EXISTS queue text COLLATE "C"
-- ;
CREATE INDEX IF NOT EXISTS am_idx_deliveries_queue ON am_deliveries (queue, state)
  WHERE queue IS NOT NULL
