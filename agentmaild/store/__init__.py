"""Mail storage: the ``MailStore`` ABC and its implementations, behind one contract.

Owns: ``base`` (the ABC and request types), ``sqlite*`` (the SQLite store, SQL as named queries
in ``sql/``), ``memory*`` (the shipped in-memory fake), ``migrate`` (schema versions), ``aio``
(the daemon's async facade and poll gate), ``pull`` (the stdlib-only reads and acks of the hot
paths), ``queries`` (the named-query loader).
May import: ``models``, ``errors``, ``ids``, ``vocab`` only — everything else builds on it.
"""
