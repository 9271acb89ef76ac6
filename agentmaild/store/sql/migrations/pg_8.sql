-- agentmaild's PostgreSQL schema, version 8 (PostgreSQL only): the daemon's claim, its ack and
-- the common send with less server work per call (functions.sql). am_claim gained a result
-- column (claim_more), which CREATE OR REPLACE cannot add: the old function goes here, and
-- functions.sql makes the current one.
DROP FUNCTION IF EXISTS am_claim(text, double precision, double precision, text, integer, integer, text)
