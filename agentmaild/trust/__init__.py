"""Who may do what: API tokens for the HTTP face, and signed mail between stores that pin each
other's keys (trust domains, issue 12 item 4).

Owns: ``tokens`` (the HTTP face's tokens: the stored record, minting, hashing, scopes; stdlib
only, the store keeps their hashes), ``envelope`` (canonical signed form, Ed25519, the receiver's
checks), ``keyfile`` (this domain's 0600 key file), ``peers`` (the pinned-peer record, the
``peer:NAME/agent`` address), ``receive`` (accepting one envelope: ``POST /v1/relay``) and
``relay`` (forwarding mail to ``peer:…`` at least once). Nonces, peers, origins and relay
marks live in the store (schema 5).
May import: ``errors``, ``ids``, ``mail``, ``store.base`` and ``cryptography``; never loaded
by the hook's hot path (``peers`` alone is, via ``mail``: stdlib only).
"""
