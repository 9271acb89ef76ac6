-- agentmaild's PostgreSQL schema, version 4 (with 3, = the SQLite schema 5): agents per host.
-- An agent names the host whose daemon delivers to it (NULL: any host), and each host's daemon
-- keeps a heartbeat row, which `status` reads to show every host's daemon (down once its beat
-- is older than 3 leases).
ALTER TABLE am_agents ADD COLUMN IF NOT EXISTS host text COLLATE "C"
-- ;
CREATE TABLE IF NOT EXISTS am_hosts (
  host text COLLATE "C" PRIMARY KEY,
  pid integer NOT NULL,
  started_at double precision NOT NULL,
  beat_at double precision NOT NULL,
  lease_s double precision NOT NULL
)
