"""Mail storage: the ``MailStore`` ABC and its implementations, behind one contract.

Owns: ``base`` (the ABC and request types), ``sqlite*`` (the SQLite store, SQL as named queries
in ``sql/``), ``postgres*`` (the PostgreSQL store: ``sql/pg_*.sql``, psycopg loaded only for a
DSN), ``memory*`` (the shipped in-memory fake), ``migrate`` (schema versions), ``aio`` /
``aio_pg`` (the daemon's async facade and poll gates), ``services*`` (what a daemon needs from
its backend: lock, heartbeat, checkpoints, outages), ``wake`` (the wake-up seam: ``notify`` /
``run``), ``marks`` (each store's change mark), ``pull`` (the stdlib-only reads and acks
of the hot paths), ``queries`` (the named-query loader), ``copy*`` (``store copy`` between
stores), ``location`` (``StoreLocation``: which store a target names, where its local state
lives, the one place a store class is chosen), ``anchor`` (a shim over it for older callers).
May import: ``models``, ``errors``, ``ids``, ``vocab`` only — everything else builds on it.
"""
