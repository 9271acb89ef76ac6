-- agentmaild's PostgreSQL schema, version 3 (= the SQLite schema 5): the trust domains — pinned
-- peer keys, envelope nonces (kept until the freshness window passes), where peer mail came from
-- (a side table), and which mail to peer:NAME/agent was relayed. Idempotent statements.
CREATE TABLE IF NOT EXISTS am_peers (
  name text COLLATE "C" PRIMARY KEY,
  public_key text NOT NULL,
  key_id text COLLATE "C" NOT NULL,
  url text,
  created_at double precision NOT NULL
)
-- ;
CREATE TABLE IF NOT EXISTS am_nonces (
  nonce text COLLATE "C" PRIMARY KEY,
  peer text COLLATE "C" NOT NULL,
  expires_at double precision NOT NULL
)
-- ;
CREATE INDEX IF NOT EXISTS am_idx_nonces_expires ON am_nonces(expires_at)
-- ;
CREATE TABLE IF NOT EXISTS am_peer_messages (
  message_id text COLLATE "C" PRIMARY KEY,
  peer text COLLATE "C" NOT NULL,
  key_id text COLLATE "C" NOT NULL,
  origin_id text COLLATE "C" NOT NULL,
  UNIQUE (peer, origin_id)
)
-- ;
CREATE TABLE IF NOT EXISTS am_relayed (
  message_id text COLLATE "C" PRIMARY KEY,
  peer text COLLATE "C" NOT NULL,
  relayed_at double precision NOT NULL
)
