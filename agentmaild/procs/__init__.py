"""Child processes: agent CLIs run in a scope, with their output split into lines and logged.

Owns: ``lines`` (the bounded line splitter and ``Line``), ``scope`` (``open_child``: argv lists,
a new session, output drained concurrently, TERM → grace → KILL of the whole group, always reaped),
``child`` (the running ``Child`` a scope yields: stdin, line drain, stall watchdog, the group stop;
``ChildExit``),
``logfiles`` (rotated per-agent log files, never opened through a planted link), ``pids`` (a
process named by pid and start time, verified before any signal), ``escapes`` (the daemon as
child subreaper; descendants that left their scope's group found, stopped and reaped),
``journal`` (the protocols a scope reports its leader through, implemented by the daemon over
the store).
May import: the standard library, anyio and structlog only; channels build on it.
"""
