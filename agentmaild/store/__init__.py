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

Where each rule lives
---------------------
Each send rule is decided, and its error worded, once, in ``checks``; the memory, SQLite and
PostgreSQL stores and the front doors (``mail.Mailer``, ``fast``, ``inject_pg``) only read rows
and ask it. A rule that also runs inside SQL names its twin; ``tests/contract/test_rule_twins.py``
proves the twins agree with ``checks`` on every case, and ``tests/contract/test_store_checks.py``
holds each rule (class and text) on all three stores.

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
