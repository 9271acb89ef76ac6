"""Mail storage: the only package that knows a backend. Callers hold a ``StoreLocation`` and ask
the store for what they need; they never ask which backend they have.

The seam. ``location`` (``StoreLocation``: which store a target names — kind, target, the local
path where its socket, logs and markers live — and ``resolve_location``) and ``kinds`` (the one
place a kind becomes code: ``open_store``, and the store's offers chosen by kind — the cold paths'
port ``open_port`` / ``port_of``, the dashboard's ``open_reader``, a daemon's ``open_services``, a
sender's ``wakes_for``, ``host_daemons``, ``store check``'s ``check_integrity`` /
``recovery_hint``).

Owns, by part:

- the contract: ``base`` (the ``MailStore`` ABC, and the daemon's offers with the defaults of a
  store that lacks them: ``run_inline``, ``run_grouped``, ``open_looks``, ``more_after``),
  ``ledgers`` (its part kept beside the mail: processes, tokens, peers, history), ``records``
  (what its calls take and return: ``InsertRequest``, ``InsertResult``, ``Released``,
  ``AgentProc``), ``checks`` (each send rule, below), ``guard`` (the thread guard's request);
- the logic written once: ``connector`` (the thin ABC it runs over) and the seams over it
  (``messages`` with ``send``, ``agents``, ``queues``, ``deliveries`` with ``claim``,
  ``history``, ``procs``,
  ``tokens``, ``trust``, ``rule_state``, ``usage`` (what each turn cost, budget marks; its
  in-memory twin too)), ``queries`` (the one loader of named queries),
  ``rows`` (rows to models);
- SQLite: ``sqlite`` (the store), ``sqlite_tx`` (its transactions and connector),
  ``sqlite_group`` (grouped writes), ``sqlite_open`` (opening a file), ``migrate`` (its schema
  versions), ``pull`` (its stdlib-only take and ack), ``looks`` (a daemon's look off its thread);
- PostgreSQL (psycopg loaded only for a DSN): ``postgres`` (the store), ``postgres_tx`` (its
  connection, pool and connector), ``postgres_migrate`` (schema steps, then the functions),
  ``postgres_lock`` / ``postgres_hosts`` / ``postgres_listen`` / ``postgres_outages`` (a host's
  lock, heartbeat, listener and outage record), ``aio_postgres`` (the daemon's async calls and
  poll gate);
- ``memory/`` (the shipped in-memory fake, held to the same contract tests): ``memory.state``
  (its dicts and lock), ``memory.messages`` with ``memory.rules``, ``memory.deliveries``,
  ``memory.agents`` (and queues), ``memory.ledgers``;
- what callers ask for, one module for the offer and one per backend: ``aio`` (the daemon's async
  facade and SQLite's poll gate), ``services`` / ``services_sqlite`` / ``services_postgres`` (a
  daemon's lock, heartbeat, listener, checkpoints, outages; ``checkpoints``, ``file_lock``),
  ``ports`` / ``port_sqlite`` / ``port_postgres`` (the cold paths' port: hook work, mail taken for
  injection within a budget, the tmux channel's reads), ``reader`` / ``reader_sqlite`` /
  ``reader_postgres`` (the dashboard's read-only reader; ``reader_costs``: its cost figures),
  ``check`` / ``check_postgres``
  (``store check``), ``copy`` / ``copy_postgres`` / ``copy_tables`` (``store copy``);
- the wake-up and the change mark: ``wake`` (``notify`` / ``run``; ``postgres_listen.NotifyWakes``
  is its LISTEN/NOTIFY side), ``marks`` (each store's one change mark: the poll gate, the
  dashboard and ``ask`` read it), ``hops`` / ``notnow`` (the daemon's thread hops);
- small parts: ``files`` (modes and links), ``redaction`` (DSNs without passwords).

A third backend, measured (``grep -rl psycopg agentmaild | grep -v '^agentmaild/store/'`` is empty
and ``scripts/layout.py`` holds it so: no file outside ``store/`` names a backend). It adds its own
files under ``store/``: the store class (``<kind>.py``), a connector (``<kind>_tx``), its SQL
(``sql/dialect/<kind>.sql``, its schema or migrations), and the offers it makes (``services_``,
``port_``, ``reader_``, ``check_``, ``copy_<kind>``; ``aio_<kind>`` only to beat ``AsyncMailStore``,
whose defaults need nothing). It edits these existing files, all under ``store/``:

- ``location.py``: the kind's name and the line of ``StoreLocation.of`` that recognises its
  target (plus ``shown`` / ``checked`` / ``is_file`` / ``shared_by_hosts`` if it is a server);
- ``kinds.py``: one branch in each factory (``open_store``, ``check_integrity``,
  ``recovery_hint``, ``open_port``, ``port_of``, ``open_services``, ``wakes_for``,
  ``host_daemons``, ``open_reader``);
- ``queries.py``: its dialect in ``DIALECTS`` and its placeholder style;
- ``copy.py``: its reader and writer in ``read_all`` / ``write_all``;
- ``check.py``: the name of its check in ``CheckReport.kind``;
- ``marks.py``: its change mark.

The connector and the SQL. The SQL stores' logic is written once per seam — ``messages`` (reads,
the pull side's take and ack, purges) with ``send`` (the insert and every rule it carries, the loop
guard included), ``agents``, ``queues``, ``history``, ``deliveries``, ``procs``, ``tokens``,
``trust``, ``rule_state`` (with the store's settings), ``deliveries`` (the claim and the ack in
``claim``; a delivery's open and close, and the mid-turn claim on them, in ``midturn``, stdlib
only for the hook) — over ``connector.Connector``: one write
transaction or one read, named queries with named parameters, rows read by column name, reads sent
ahead (``prefetch``: one round trip in PostgreSQL's pipeline mode), ``lock(*keys)`` (PostgreSQL's
advisory locks; a no-op on SQLite's single writer), ``notify`` at commit (PostgreSQL's NOTIFY), a
savepoint, the dialect's JSON columns and list parameters, a row's number where the dialect has
one (SQLite's rowid), the forms only one dialect offers (``offers`` / ``single``: PostgreSQL's
one-statement send), ``one_statement(name)`` (a server-side function doing a whole claim or ack
atomically, PostgreSQL's ``am_claim`` / ``am_ack``; None where the dialect has none, so the general
form ``claim.claim_in`` / ``claim.ack_in`` runs instead), ``after_commit``, driver errors mapped
once to ``StoreError`` (``Duplicate`` for a unique key). ``sqlite_tx.SqliteConnector`` and
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
Each send rule is decided, and its error worded, once, in ``checks``; the SQL stores' one send
(``send.insert``, both backends), the memory store (``memory.messages``, ``memory.rules``) and the
front doors (``mail.mailer.Mailer``, ``hot.check``, the cold paths' ``ports``) only read rows and
ask it. PostgreSQL's common send is also one statement, ``am_send_one`` (``sql/functions.sql``,
reached as the query ``send_one`` when the connector ``offers`` it, arguments from
``send.send_one_params``): it writes only what ``send.insert`` would, or nothing, and then
``send.insert`` answers. A rule that also runs inside SQL names its twin;
``tests/contract/test_rule_twins.py`` proves the twins agree with ``checks`` on every case, and
``tests/contract/test_store_checks.py`` holds each rule (class and text) on all three stores.

- recipient refusal: ``checks.recipient_refusal`` (+ ``ended``, ``merged_state``), asked by
  ``InsertRequest.check_recipient`` from ``send.insert``; SQL twin: ``am_send_one``'s state test
  (``test_postgres_am_send_one_agrees_with_checks``); ``send_probe`` only reads the state.
- unread cap: ``checks.unread_cap_reached`` / ``inbox_full``, asked by ``send.insert``; SQL
  twins: ``unread_count_reaches``, ``send_probe``'s ``at_cap``, ``am_send_one``
  (``test_sqlite_send_probe_agrees_with_checks``, ``test_postgres_am_send_one_agrees_with_checks``).
- repeat collapse: ``checks.collapses`` over ``window_start``; counted and remembered (and the
  memory pruned) in ``send``; SQL twins: ``recent_send_get``, ``send_probe``'s ``earlier_ids``,
  ``am_send_one`` (the same two tests).
- rate limit: ``checks.rate_limited``, counted over ``window_start``, trimmed at
  ``rate_trim_before``, in ``send``; reset by ``messages.StoreMessages.reset_rate_limit``.
- thread guard: ``checks.trips_thread_cap`` / ``held_error``, counted and held in ``send``; its
  request is ``guard.ThreadGuard``; ``rule_state`` releases a hold. A send without one (a group
  send, an idempotent send) on a held thread: ``checks.held_pair`` over ``held_pairs``, asked by
  ``Mailer``.
- the team rules themselves (windows, caps, sizes; ``config.TEAM_RULES``): the store's
  ``team_rules`` (``am_settings``, written by its daemon), read by ``Mailer.rules`` on every send
  (a store keeps a read for ``rule_state.TEAM_RULES_FRESH_S``); never the sender's config.
- idempotency: ``checks.idempotency_conflict`` (lookup and insert), ``replays`` (a key whose
  messages are all gone is free); read and written in ``send`` (``find_idempotent``).
- the locks a send holds on PostgreSQL (advisory, ``Tx.lock``): ``send.lock_keys``.
- known agent (reading as a name): ``checks.is_known``, honouring
  ``limits.refuse_unknown_recipients`` on every path; its error is ``errors.UnknownAgent``.
- window edges: ``checks.window_start`` / ``in_window`` — every window is ``(now - w, now]``.
"""
