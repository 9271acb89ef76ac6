-- agentmaild's PostgreSQL queries for the trust domains (schema 3). Same format as pg_queries.sql.

-- name: peer_insert
INSERT INTO am_peers (name, public_key, key_id, url, created_at)
VALUES (%(name)s, %(public_key)s, %(key_id)s, %(url)s, %(created_at)s);

-- name: peer_get
SELECT * FROM am_peers WHERE name = %(name)s;

-- name: peer_list
SELECT * FROM am_peers ORDER BY name;

-- name: peer_delete
DELETE FROM am_peers WHERE name = %(name)s;

-- name: nonce_prune
DELETE FROM am_nonces WHERE expires_at < %(now)s;

-- name: nonce_claim
INSERT INTO am_nonces (nonce, peer, expires_at) VALUES (%(nonce)s, %(peer)s, %(expires_at)s)
ON CONFLICT (nonce) DO NOTHING;

-- name: peer_origin_insert
INSERT INTO am_peer_messages (message_id, peer, key_id, origin_id)
VALUES (%(message_id)s, %(peer)s, %(key_id)s, %(origin_id)s) ON CONFLICT DO NOTHING;

-- name: peer_origin_get
SELECT * FROM am_peer_messages WHERE message_id = %(id)s;

-- name: relayed_insert
INSERT INTO am_relayed (message_id, peer, relayed_at) VALUES (%(message_id)s, %(peer)s, %(at)s)
ON CONFLICT (message_id) DO NOTHING;

-- name: relay_pending
SELECT * FROM messages
WHERE to_agent LIKE 'peer:%%' AND id NOT IN (SELECT message_id FROM am_relayed)
ORDER BY created_at, id LIMIT %(limit)s;
