-- agentmaild schema, version 1.
-- The messages table is Overstory's, column for column and CHECK for CHECK, so `ov mail` and
-- agentmaild share one file. agentmaild's additions are nullable columns (added by the migration,
-- never declared here, so a table Overstory creates and one we create end up identical) and the
-- am_* tables below.

CREATE TABLE IF NOT EXISTS messages (
  id TEXT PRIMARY KEY,
  from_agent TEXT NOT NULL,
  to_agent TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  type TEXT NOT NULL DEFAULT 'status' CHECK(type IN ('status','question','result','error','worker_done','worker_died','merge_ready','merged','merge_failed','escalation','health_check','dispatch','assign','decision_gate','interrupt')),
  priority TEXT NOT NULL DEFAULT 'normal' CHECK(priority IN ('low','normal','high','urgent')),
  thread_id TEXT,
  payload TEXT,
  read INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS idx_inbox ON messages(to_agent, read);
CREATE INDEX IF NOT EXISTS idx_thread ON messages(thread_id);

CREATE TABLE IF NOT EXISTS am_agents (
  name TEXT PRIMARY KEY,
  capability TEXT NOT NULL,
  parent TEXT,
  state TEXT NOT NULL DEFAULT 'booting'
    CHECK(state IN ('booting','working','idle','stalled','completed','zombie')),
  channel TEXT NOT NULL DEFAULT 'pull' CHECK(channel IN ('pull','spawn','stdin','tmux')),
  command TEXT,            -- JSON argv list
  cwd TEXT,
  tmux_target TEXT,
  tmux_socket TEXT,
  preset TEXT,
  session_id TEXT,
  poll_interval_s REAL,
  settings TEXT NOT NULL DEFAULT '{}',
  turn_state TEXT,         -- busy | idle | waiting | gone, reported by hooks
  turn_state_at TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS am_deliveries (
  id TEXT PRIMARY KEY,
  agent TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('claimed','pending','acked','dead')),
  attempts INTEGER NOT NULL DEFAULT 0,   -- times claimed; > 1 means a redelivery
  failures INTEGER NOT NULL DEFAULT 0,   -- failed attempts since the last success or retry
  lease_until REAL,                      -- unix seconds; wall clock so it survives restarts
  last_error TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS am_idx_deliveries ON am_deliveries(agent, state);

CREATE TABLE IF NOT EXISTS am_idempotency (
  sender TEXT NOT NULL,
  key TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  message_ids TEXT NOT NULL,  -- JSON list
  created_at TEXT NOT NULL,
  PRIMARY KEY (sender, key)
);

CREATE TABLE IF NOT EXISTS am_rate_log (
  from_agent TEXT NOT NULL,
  to_agent TEXT NOT NULL,
  at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS am_idx_rate ON am_rate_log(from_agent, to_agent, at);

CREATE TABLE IF NOT EXISTS am_nudges (
  agent TEXT NOT NULL,
  message_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (agent, message_id)
);

-- Batch headers the UserPromptSubmit hook saw in a submitted prompt: the tmux channel's proof
-- that its paste was submitted (hooks.delivery_seen). Rows older than a week are pruned.
CREATE TABLE IF NOT EXISTS am_prompt_seen (
  delivery_id TEXT PRIMARY KEY,
  agent TEXT NOT NULL,
  session_id TEXT,
  at TEXT NOT NULL
);

-- The registry's version: bumped by any change to an agent's registration (not by the turn
-- state the hooks record), so the daemon re-reads the registry only when it changed.
CREATE TABLE IF NOT EXISTS am_registry (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL
);
INSERT OR IGNORE INTO am_registry (id, version) VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS am_registry_on_insert AFTER INSERT ON am_agents
BEGIN UPDATE am_registry SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS am_registry_on_delete AFTER DELETE ON am_agents
BEGIN UPDATE am_registry SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS am_registry_on_update
AFTER UPDATE OF capability, parent, state, channel, command, cwd, tmux_target, tmux_socket,
                preset, poll_interval_s, settings ON am_agents
BEGIN UPDATE am_registry SET version = version + 1 WHERE id = 1; END;

-- Schema 3. One row per finished delivery attempt (the `deliveries` command's history); bounded
-- by [store] attempts_keep_days and purged with `purge`. message_ids is a JSON list.
CREATE TABLE IF NOT EXISTS am_attempts (
  id INTEGER PRIMARY KEY,
  delivery_id TEXT NOT NULL,
  agent TEXT NOT NULL,
  message_ids TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  outcome TEXT NOT NULL,        -- acked | failed | unavailable | dead | released | mid-turn
  error TEXT,
  duration_s REAL,
  at REAL NOT NULL              -- unix seconds, when the attempt ended
);
CREATE INDEX IF NOT EXISTS am_idx_attempts_agent ON am_attempts(agent, at);
CREATE INDEX IF NOT EXISTS am_idx_attempts_delivery ON am_attempts(delivery_id);

-- Schema 3. Agent process groups a daemon started (spawn turns, stdin processes), so the next
-- daemon can stop a dead predecessor's survivors before redelivering. A row is identified by
-- pid and the process's start time (never trust a bare, possibly reused pid).
CREATE TABLE IF NOT EXISTS am_agent_procs (
  pid INTEGER NOT NULL,
  start_time TEXT NOT NULL,     -- /proc/<pid>/stat starttime (clock ticks since boot) or ps lstart
  pgid INTEGER NOT NULL,
  agent TEXT NOT NULL,
  delivery_id TEXT,
  daemon_pid INTEGER NOT NULL,
  started_at REAL NOT NULL,
  PRIMARY KEY (pid, start_time)
);

-- Schema 4. Bearer tokens of the HTTP API (`agentmaild tokens`): only the SHA-256 of a token is
-- kept. agent 'operator' acts for every agent; scopes is a comma-separated subset of read,send,ack.
CREATE TABLE IF NOT EXISTS am_tokens (
  id TEXT PRIMARY KEY,
  agent TEXT NOT NULL,
  scopes TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_at REAL NOT NULL,     -- unix seconds
  expires_at REAL,              -- NULL: never
  revoked_at REAL               -- NULL: in force
);
-- Schema 4. The team rules (agentmaild.rules). The loop guard's memory: the last send of each
-- content digest (sender, to, subject, body) for duplicate collapse, the messages each pair
-- exchanged per thread (ping-pong cap), the threads it holds, and store-wide rule counters.
CREATE TABLE IF NOT EXISTS am_recent_sends (
  digest TEXT PRIMARY KEY,
  message_ids TEXT NOT NULL,    -- JSON list: what a collapsed repeat returns
  at REAL NOT NULL              -- unix seconds of the original send
);
-- Schema 6 dropped its index on (at): the loop guard prunes in rowid order (send.py).
CREATE TABLE IF NOT EXISTS am_thread_log (
  thread_id TEXT NOT NULL,
  pair TEXT NOT NULL,           -- the two agents, sorted, joined by '|'
  at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS am_idx_thread_log ON am_thread_log(thread_id, pair, at);
CREATE TABLE IF NOT EXISTS am_thread_holds (
  thread_id TEXT NOT NULL,
  pair TEXT NOT NULL,
  messages INTEGER NOT NULL,    -- how many it had seen in the window when it held
  escalation_id TEXT,           -- the one escalation mail it sent
  held_at TEXT NOT NULL,
  PRIMARY KEY (thread_id, pair)
);
CREATE TABLE IF NOT EXISTS am_counters (
  name TEXT PRIMARY KEY,        -- collapsed | unread_escalated
  value INTEGER NOT NULL
);
-- Schema 4. Messages the long-unread rule has escalated: at most one escalation per message.
CREATE TABLE IF NOT EXISTS am_escalated (
  message_id TEXT PRIMARY KEY,
  at REAL NOT NULL
);
-- Schema 4. Work-queue membership (`agents add --queue NAME`): mail to `queue:NAME` goes to one
-- member per attempt. am_deliveries.queue (a column the migration adds) names the queue of a
-- delivery that carries queue mail; such a pending delivery may be claimed by any member.
CREATE TABLE IF NOT EXISTS am_queue_members (
  queue TEXT NOT NULL,
  agent TEXT NOT NULL,
  PRIMARY KEY (queue, agent)
);
CREATE INDEX IF NOT EXISTS am_idx_queue_members_agent ON am_queue_members(agent);
-- Schema 5. Trust domains (agentmaild.trust): the peers whose signed mail this store accepts,
-- by pinned Ed25519 key; the envelope nonces seen (kept until the freshness window has passed,
-- so a replay is refused across restarts); where each message from a peer came from (a side
-- table, not columns on Overstory's `messages`); and which mail to `peer:NAME/agent` was relayed.
CREATE TABLE IF NOT EXISTS am_peers (
  name TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,     -- ed25519:<base64 of the 32 raw bytes>
  key_id TEXT NOT NULL,
  url TEXT,
  created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS am_nonces (
  nonce TEXT PRIMARY KEY,
  peer TEXT NOT NULL,
  expires_at REAL NOT NULL      -- unix seconds: after this an envelope carrying it is stale anyway
);
CREATE INDEX IF NOT EXISTS am_idx_nonces_expires ON am_nonces(expires_at);
CREATE TABLE IF NOT EXISTS am_peer_messages (
  message_id TEXT PRIMARY KEY,
  peer TEXT NOT NULL,
  key_id TEXT NOT NULL,
  origin_id TEXT NOT NULL,      -- the sender's message id
  UNIQUE (peer, origin_id)
);
CREATE TABLE IF NOT EXISTS am_relayed (
  message_id TEXT PRIMARY KEY,
  peer TEXT NOT NULL,
  relayed_at REAL NOT NULL
);
-- Schema 8. The store's own settings, one JSON value per name. "team_rules": the [limits] keys
-- that protect the team (config.TEAM_RULES), written by the store's daemon from its own config at
-- start and on reload; every send is judged by them, never by the sender's config.
CREATE TABLE IF NOT EXISTS am_settings (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL,          -- JSON
  updated_at REAL NOT NULL      -- unix seconds
);
-- Schema 10. What a delivery attempt cost, where the agent's output said (channels/usage.py): one
-- row per attempt with usage, beside its am_attempts row (same delivery_id and attempt). thread_id:
-- the thread of the batch's newest message. cost_usd NULL: the CLI reports tokens only.
CREATE TABLE IF NOT EXISTS am_usage (
  id INTEGER PRIMARY KEY,
  delivery_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  agent TEXT NOT NULL,
  thread_id TEXT,
  tokens_in INTEGER NOT NULL,
  tokens_out INTEGER NOT NULL,
  cost_usd REAL,
  at REAL NOT NULL              -- unix seconds, when the attempt ended
);
CREATE INDEX IF NOT EXISTS am_idx_usage_agent ON am_usage(agent, at);
CREATE INDEX IF NOT EXISTS am_idx_usage_at ON am_usage(at);
CREATE INDEX IF NOT EXISTS am_idx_usage_delivery ON am_usage(delivery_id);
-- Schema 10. The operator's word on an agent's daily budget (`agents budget`): a raise for one
-- UTC day, and a reset (spending before reset_at does not count that day).
CREATE TABLE IF NOT EXISTS am_budgets (
  agent TEXT PRIMARY KEY,
  day TEXT NOT NULL,            -- the UTC date (YYYY-MM-DD) raised_usd and reset_at are for
  raised_usd REAL NOT NULL DEFAULT 0,
  reset_at REAL,
  updated_at REAL NOT NULL
);
