"""Why each mutant left alive by ``make mutate`` was left: equivalent, or timing only.

``RULES`` are tried in order against a survivor's short name (``Class.method__mutmut_N``, a glob)
and its one-line diff (a substring; empty matches any); the first match gives the reason. A
reason starting "equivalent" means no test can tell the mutant from the original; "timing only"
means only a wall-clock bound could, which a loaded machine would make flaky; "not yet triaged"
means a survivor no rule names (a new one: kill it with a test, or add a rule saying why not).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

_FALSY = "equivalent: None and False (or '' and None) behave the same wherever this is read"
_KEYS = "equivalent: sqlite3.Row looks keys up case-insensitively"
_SQL_CASE = "equivalent: SQLite reads keywords and table and column names case-insensitively"
_NOW = "equivalent: None means the current wall time, which is what ``now`` holds here"

RULES: tuple[tuple[str, str, str], ...] = (
    # loop.py
    ("DeliveryLoop.__init__*", "self._lease_until",
     "equivalent: _attempt sets it from the claimed batch before _keep_lease or _as_leased "
     "reads it"),
    ("DeliveryLoop.__init__*", "= None`", _FALSY),
    ("DeliveryLoop.__init__*", "self._aborted = True",
     "equivalent: _deliver sets it before any read"),
    ("DeliveryLoop.__init__*", "self._confirmed = True",
     "equivalent: _attempt sets it to False before any read"),
    ("DeliveryLoop._attempt__*", "fresh=",
     "equivalent: step() clears the spell just before every claim, so the delivery's spell "
     "starts afresh whatever ``fresh`` says"),
    ("DeliveryLoop._attempt__*", 'Outcome(StepResult.CANCELLED, "cancelled")',
     "equivalent: _settle logs and stores ``outcome.error or result.value``, and the value of "
     "StepResult.CANCELLED is 'cancelled'"),
    ("DeliveryLoop._attempt__*", 'self.in_flight = ""', _FALSY),
    ("DeliveryLoop._deliver__*", "outcome =",
     "equivalent: the initial outcome is overwritten by _inject's return (no checkpoint "
     "between its return and the assignment) or unused when the turn is cancelled"),
    ("DeliveryLoop._keep_lease__*", "/ 4",
     "timing only: the first extension comes at a quarter of a lease instead of a third, still "
     "long before the lease ends; test_the_lease_is_first_extended_a_third_of_a_lease_in has "
     "a lower bound that catches it unless the machine delays that sleep by over 0.06 s"),
    ("DeliveryLoop._wait__*", "deadline_s if (deadline_s is not None) or True",
     "equivalent: anyio.move_on_after(None) sets no deadline, as float('inf') does"),
    ("DeliveryLoop._wait__*", '"INF"', "equivalent: float('INF') is infinity too"),
    # figures.py
    ("LoopFigures.__init__*", '= ""', _FALSY),
    # bookkeeping.py
    ("Bookkeeper.release__*", '"failed"',
     "equivalent for the product: every caller passes outcome explicitly"),
    ("Bookkeeper.*", "delay * 2, 6.0)`",
     "timing only: the retry delay's cap (5 s, not 6 s) is first reached after seven doubling "
     "retries, 6.35 s of real sleeps, and only changes how long later retries wait; a test "
     "would sleep over 11 s"),
    # supervisor.py
    ("Supervisor._tick__*", "_sweep_due = None", _FALSY),
    # recovery.py
    ("x__report_interrupted__*", 'created_at=iso_now(now),` → `priority',
     "equivalent: the Message default type is 'status'"),
    ("x__report_interrupted__*", "now",
     "equivalent: iso_now(None) reads the wall clock itself, and this insert sets no rate "
     "limit (the one use of InsertRequest.now as a number)"),
    ("x_recover__*", "kill_grace_s: float = 6.0",
     "equivalent for the product: its one caller (daemon/serve.py) passes kill_grace_s from "
     "the config"),
    # stores
    # Only a key's case changed (the whole key in capitals): not any mutant on a line with a key.
    *((f, f'["{k}"]', _KEYS) for f in ("x__*", "SqliteDeliveries.*")
      for k in ("ID", "TO_AGENT", "AGENT", "STATE", "FAILURES")),
    *(("x__queue_batch__*", f'→ `conn.execute("{sql}', _SQL_CASE)
      for sql in ("update messages set", "UPDATE MESSAGES SET DELIVERY_ID")),
    ("x__claim__*", "iso_now(None)", _NOW + " in the daemon; only tests pass a fixed one"),
    ("SqliteDeliveries.reap_expired__*", "iso_now(None)",
     _NOW + " in the daemon; only tests pass a fixed one"),
    ("MemoryDeliveries._dead_letter__*", "unread=None", _FALSY),
    ("MemoryDeliveries._queue_batch__*", "d.updated_at = None",
     "equivalent: the memory store reads a delivery's updated_at only for dead letters, and "
     "release() stamps it in the same step that makes a delivery dead"),
    ("MemoryDeliveries._queue_batch__*", 'd.state = "acked"` → `d.state = ',
     "equivalent: the memory store never reads 'acked'; its readers test for 'pending', "
     "'claimed' or 'dead', so any other value closes the delivery alike"),
    ("MemoryDeliveries._reclaim_pending__*", "",
     "equivalent: the memory store lists no deliveries, and a pending delivery with no unread "
     "mail is invisible to every reader (claim takes only unread members, pending_agents "
     "looks at unread mail); the next claim skips it again"),
)


def reason_for(short: str, diff: str) -> str:
    for pattern, fragment, reason in RULES:
        if fnmatchcase(short, pattern) and fragment in diff:
            return reason
    return "not yet triaged"
