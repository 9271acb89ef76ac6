-- agentmaild's PostgreSQL schema, version 10 (SQLite schema 8): the store's own settings, one
-- JSON value per name. "team_rules" holds the [limits] keys that protect the team
-- (config.TEAM_RULES), written by the store's daemons from their config at start and on reload;
-- every send is judged by them, never by the sender's config.
CREATE TABLE IF NOT EXISTS am_settings (
  name text COLLATE "C" PRIMARY KEY,
  value jsonb NOT NULL,
  updated_at double precision NOT NULL
)
