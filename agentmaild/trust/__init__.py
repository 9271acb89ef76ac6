"""Trust across domains (issue 12 item 4, first part): signed mail envelopes.

Owns: ``envelope`` (the canonical signed form of one message, Ed25519 signing and the checks a
receiving store runs: signature against a pinned key, body hash, freshness window). Still to come
(next session): the peers and nonces tables, ``keys create`` / ``peers add``, the relay endpoint
and ``agentmaild relay --to URL``.
May import: ``errors`` and ``cryptography`` only; nothing imports it yet.
"""
