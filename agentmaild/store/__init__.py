"""Mail storage: the only package that knows a backend. Callers hold a ``StoreLocation`` and ask
the store for what they need; they never ask which backend they have.

The seam. ``location`` (``StoreLocation``: which store a target names — kind, target, the local
path where its socket, logs and markers live — and ``resolve_location``) and ``kinds`` (the one
place a kind becomes code: ``open_store``, and the store's offers chosen by kind — the cold paths'
port ``open_port`` / ``port_of``, the dashboard's ``open_reader``, a daemon's ``open_services``, a
sender's ``wakes_for``, ``host_daemons``). A third backend is a new ``StoreLocation`` kind, a
branch in each ``kinds`` factory, a connector, a dialect file and its ``*_<backend>`` modules: no
file outside ``store/``.

Owns: ``base`` (the ``MailStore`` ABC and request types), ``checks`` (each send rule, below),
``connector`` (the thin ABC the logic runs over) and the seams written once over it, ``sqlite*``
(the SQLite store), ``postgres*`` (the PostgreSQL store, psycopg loaded only for a DSN),
``memory*`` (the shipped in-memory fake, held to the same contract tests), ``migrate`` (SQLite's
schema versions), ``aio`` / ``aio_pg`` (the daemon's async facade and poll gates), ``services*``
(what a daemon needs from its backend: lock, heartbeat, listener, checkpoints, outages), ``wake``
(the one wake-up seam: ``notify`` / ``run``; ``postgres_listen.NotifyWakes`` is its LISTEN/NOTIFY
side), ``marks`` (each store's one change mark: the poll gate, the dashboard and ``ask`` read it),
``ports`` / ``port_sqlite`` / ``port_postgres`` (the cold paths' port: hook work, mail taken for
injection within a budget, the tmux channel's reads), ``pull`` (SQLite's stdlib-only take and
ack), ``reader*`` (the dashboard's read-only reader), ``queries`` (the one loader of named
queries), ``copy*`` (``store copy``), ``check*`` (``store check``), ``files`` (modes and links).

The connector and the SQL. The SQL stores' logic is written once per seam — ``agents``, ``queues``,
``history``, ``procs``, ``tokens``, ``trust``, ``rule_state``, ``deliveries`` (the claim and the
ack in ``claim``) (messages and the loop guard inside a send are still ``sqlite_*`` /
``postgres_*`` pairs) — over ``connector.Connector``:
one write transaction or one read, named queries with named parameters, rows read by column name,
``lock(*keys)`` (PostgreSQL's advisory locks; a no-op on SQLite's single writer), ``notify`` at
commit (PostgreSQL's NOTIFY), a savepoint, the dialect's JSON columns, driver errors mapped once to
``StoreError`` (``Duplicate`` for a unique key), and ``one_statement(name)``: a dialect's
server-side function doing a whole operation atomically (PostgreSQL's ``am_claim``, ``am_ack``),
None where it has none, so the general form (``claim.claim_in``, ``claim.ack_in``) runs instead —
never a branch on the backend. ``sqlite_tx.SqliteConnector`` and
``postgres_tx.PostgresConnector`` implement it over each backend's tuned plumbing (busy polling and
grouped writes; pool, kept cursor, pipeline mode, retries). Each query is written once in
``sql/queries.sql`` (``:name`` parameters, SQLite runs the text as it is);
``sql/dialect/postgres.sql`` holds only the queries whose PostgreSQL text truly differs and
PostgreSQL's own, and ``queries.queries_for`` turns the placeholders into psycopg's at load.
PostgreSQL's server-side functions and their triggers (``am_send_one``, ``am_claim``, ``am_ack``, …)
are defined once, current version only, in ``sql/functions.sql``, applied after every migration run;
``sql/migrations/pg_N.sql`` are schema steps only (SQLite's schema is ``sql/schema.sql``).

May import: ``models``, ``errors``, ``ids``, ``mail.vocab``, ``trust.tokens`` and ``trust.peers``
(records it stores), ``config`` and ``control`` lazily (a daemon's services, a sender's wake-up);
everything else builds on it.

Where each rule lives
---------------------
Each send rule is decided, and its error worded, once, in ``checks``; the memory, SQLite and
PostgreSQL stores and the front doors (``mail.mailer.Mailer``, ``hot.check``, the cold paths'
``ports``) only read rows and ask it. A rule that also runs inside SQL names its twin;
``tests/contract/test_rule_twins.py`` proves the twins agree with ``checks`` on every case, and
``tests/contract/test_store_checks.py`` holds each rule (class and text) on all three stores.

- recipient refusal: ``checks.recipient_refusal`` (+ ``ended``, ``merged_state``), asked by
  ``InsertRequest.check_recipient``; SQL twin: ``am_send_one``'s state test
  (``test_postgres_am_send_one_agrees_with_checks``); SQLite's ``send_probe`` only reads the state.
- unread cap: ``checks.unread_cap_reached`` / ``inbox_full``; SQL twins: ``unread_count_reaches``,
  ``send_probe``'s third column, ``am_send_one`` (``test_sqlite_send_probe_agrees_with_checks``,
  ``test_postgres_am_send_one_agrees_with_checks``).
- repeat collapse: ``checks.collapses`` over ``window_start``; SQL twins: ``recent_send_get``,
  ``send_probe``'s first column, ``am_send_one`` (the same two tests).
- rate limit: ``checks.rate_limited``, counted over ``window_start``, trimmed at
  ``rate_trim_before``.
- thread guard: ``checks.trips_thread_cap`` / ``held_error``; its request is ``guard.ThreadGuard``.
- idempotency: ``checks.idempotency_conflict`` (lookup and insert), ``replays`` (a key whose
  messages are all gone is free).
- known agent (reading as a name): ``checks.is_known``, honouring
  ``limits.refuse_unknown_recipients`` on every path; its error is ``errors.UnknownAgent``.
- window edges: ``checks.window_start`` / ``in_window`` — every window is ``(now - w, now]``.
"""
