-- agentmaild's PostgreSQL schema, version 5: the dashboard's reads (PostgreSQL only; SQLite
-- searches with FTS5 at query time instead). Mail search is full-text over subject and body
-- (the expression must match web/pg_queries.sql's `search` word for word to use the index),
-- and "the newest mail" is ordered by (created_at, id).
CREATE INDEX IF NOT EXISTS am_idx_messages_fts ON messages
  USING gin (to_tsvector('simple', subject || ' ' || body))
-- ;
CREATE INDEX IF NOT EXISTS am_idx_messages_newest ON messages (created_at, id)
