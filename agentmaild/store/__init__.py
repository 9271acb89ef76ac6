"""Mail storage: the ``MailStore`` ABC and its implementations, behind one contract.

Owns: ``base`` (the ABC and request types), ``sqlite*`` (the SQLite store, SQL as named queries
in ``sql/``), ``postgres*`` (the PostgreSQL store: ``sql/migrations/``, psycopg loaded only for a
DSN), ``memory*`` (the shipped in-memory fake), ``migrate`` (schema versions), ``aio`` /
``aio_pg`` (the daemon's async facade and poll gates), ``pull`` (the stdlib-only reads and acks
of the hot paths), ``queries`` (the named-query loader), ``copy*`` (``store copy`` between
stores), ``anchor`` (a PostgreSQL store's local directory).

The connector and the SQL. The SQL stores' logic is written once per seam — ``agents``, ``queues``,
``history``, ``procs``, ``tokens``, ``trust``, ``rule_state`` (messages, deliveries and the loop
guard inside a send are still ``sqlite_*`` / ``postgres_*`` pairs) — over ``connector.Connector``:
one write transaction or one read, named queries with named parameters, rows read by column name,
``lock(*keys)`` (PostgreSQL's advisory locks; a no-op on SQLite's single writer), ``notify`` at
commit (PostgreSQL's NOTIFY), a savepoint, the dialect's JSON columns, driver errors mapped once to
``StoreError`` (``Duplicate`` for a unique key). ``sqlite_tx.SqliteConnector`` and
``postgres_tx.PostgresConnector`` implement it over each backend's tuned plumbing (busy polling and
grouped writes; pool, kept cursor, pipeline mode, retries). Each query is written once in
``sql/queries.sql`` (``:name`` parameters, SQLite runs the text as it is);
``sql/dialect/postgres.sql`` holds only the queries whose PostgreSQL text truly differs and
PostgreSQL's own, and ``queries.queries_for`` turns the placeholders into psycopg's at load.
PostgreSQL's server-side functions and their triggers (``am_send_one``, ``am_claim``, ``am_ack``, …)
are defined once, current version only, in ``sql/functions.sql``, applied after every migration run;
``sql/migrations/pg_N.sql`` are schema steps only (SQLite's schema is ``sql/schema.sql``).

May import: ``models``, ``errors``, ``ids``, ``vocab`` only — everything else builds on it.
"""
