"""Why each mutant left alive by ``make mutate`` was left: equivalent, or not worth a test (yet).

``RULES`` are tried in order against a survivor's short name (``Class.method__mutmut_N``, a glob)
and its one-line diff (a substring; empty matches any); the first match gives the reason. A
reason starting "equivalent" means no test can tell the mutant from the original; "left" means a
test could, but was not written, and says what it would take.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

_FALSY = "equivalent: None and False (or '' and None) behave the same wherever this is read"
_KEYS = "equivalent: sqlite3.Row looks keys up case-insensitively"
_ROUND = "left: only the rounding of a logged or shown figure; tests use exact values"
_RACE = (
    "left: only seen when a cancellation lands after the channel confirmed or inside the "
    "shielded settle, a window of microseconds no deterministic test can hit"
)
_LATENCY = (
    "left: only changes how soon the loop steps again (latency or idle CPU), not what it "
    "delivers; the tests bound outcomes, not milliseconds"
)
_NOW = "equivalent: None means the current wall time, which is what ``now`` holds here"

RULES: tuple[tuple[str, str, str], ...] = (
    # loop.py
    ("DeliveryLoop.__init__*", "= None`", _FALSY),
    ("DeliveryLoop.__init__*", "self._aborted = True",
     "equivalent: _deliver sets it before any read"),
    ("DeliveryLoop.__init__*", "self._confirmed = True",
     "equivalent: _attempt sets it to False before any read"),
    ("DeliveryLoop._attempt__*", "body_limit",
     "left: the body cut only bites on bodies over batch_max_chars - 1500; render's own tests "
     "cover the cut, no loop test sends such a body"),
    ("DeliveryLoop._attempt__*", "agent=None",
     "left: the agent name only appears in render's reply hints; no loop test reads them"),
    ("DeliveryLoop._attempt__*", "fresh=",
     "equivalent: step() clears the spell before every claim, so the delivery's spell is "
     "always fresh"),
    ("DeliveryLoop._attempt__*", "Outcome(", _RACE),
    ("DeliveryLoop._attempt__*", "_confirmed", _RACE),
    ("DeliveryLoop._attempt__*", "shield=", _RACE),
    ("DeliveryLoop._attempt__*", 'self.in_flight = ""', _FALSY),
    ("DeliveryLoop._deliver__*", "anyio.current_time() -",
     "left: a deadline in the past times out at once; the timeout test's turn hangs anyway and "
     "the quick-delivery test has no timeout of its deadline's size"),
    ("DeliveryLoop._deliver__*", "outcome =",
     "equivalent: the initial outcome is overwritten by _inject or unused when cancelled"),
    ("DeliveryLoop._deliver__*", '_deliver_scope = ""', _FALSY),
    ("DeliveryLoop._inject__*", "self._confirmed", _RACE),
    ("DeliveryLoop._keep_lease__*", "/ 4",
     "equivalent in effect: a quarter of a lease still extends well before the lease ends"),
    ("DeliveryLoop._keep_lease__*", "",
     "left: needs extend_lease to fail with a store error mid-turn (a FaultyStore loop test)"),
    ("DeliveryLoop._wait__*", '"INF"', "equivalent: float('INF') is infinity too"),
    ("DeliveryLoop._wait*", "", _LATENCY),
    ("DeliveryLoop.run__*", "", _LATENCY),
    # figures.py
    ("LoopFigures.__init__*", '= ""', _FALSY),
    ("LoopFigures.__init__*", "backoff_until = 1.0",
     "equivalent while the monotonic clock reads over 1 s (always, after boot)"),
    ("LoopFigures._settle__*", "backoff_until = 0, 1.0",
     "equivalent while the monotonic clock reads over 1 s (always, after boot)"),
    ("LoopFigures._line__*", "", _ROUND),
    ("LoopFigures._settle__*", "round(delay", _ROUND),
    ("LoopFigures.check_busy__*", "round(", _ROUND),
    ("LoopFigures.snapshot__*", "round(", _ROUND),
    ("LoopFigures.check_busy__*", "delivery_id",
     "left: needs a busy_long warning during a delivery in flight (a long-turn check_busy test)"),
    ("LoopFigures._settle__*", "released is not None",
     "left: only when the release itself failed (store error past the lease); needs a "
     "FaultyStore loop test"),
    ("LoopFigures._settle__*", "None, released.messages",
     "left: the batch only names the delivery in delivery.ndr_failed, when the NDR fails"),
    ("LoopFigures._settle__*", "dead_total = 1",
     "left: needs two dead letters from one loop (max_attempts twice over)"),
    ("LoopFigures._settle__*", "spent_s, count=0",
     "left: the duration of a cancelled release; the cancel tests do not read duration_s"),
    # bookkeeping.py
    ("Bookkeeper.release__*", '"failed"',
     "equivalent for the product: every caller passes outcome explicitly"),
    ("Bookkeeper.*", "delay",
     "left: release retries log nothing, and the 5 s cap needs 7 failed retries; only the "
     "time taken would show it"),
    # supervisor.py
    ("Supervisor._tick__*", "changed or",
     "equivalent: a registry change always moves data_version too"),
    ("Supervisor._tick__*", "_sweep_due = None", _FALSY),
    ("Supervisor._tick_forever__*", "tick_failed",
     "left: needs the poll gate to fail mid-run (a closed or corrupted read connection)"),
    ("Supervisor._tick_forever__*", "entry.loop is None",
     "left: only skips check_busy; needs a supervisor test that waits for delivery.busy_long"),
    # recovery.py
    ("x__report_interrupted__*", "now", _NOW),
    ("x__report_interrupted__*", 'priority="high", created_at=iso_now(now),` → `priority',
     "equivalent: the Message default type is 'status'"),
    ("x__report_interrupted__*", "", "equivalent: created_at defaults to the current time"),
    ("x_recover__*", "",
     "left: orphans are only found with live agent processes of a dead daemon; the real-daemon "
     "tests in tests/reliability cover that, and mutmut cannot see into their subprocess"),
    # stores
    ("x__*", '["', _KEYS),
    ("SqliteDeliveries.*", '["', _KEYS),
    ("x__claim__*", "iso_now(None)", _NOW + " in the daemon; only tests pass a fixed one"),
    ("SqliteDeliveries.reap_expired__*", "iso_now(None)",
     _NOW + " in the daemon; only tests pass a fixed one"),
    ("MemoryDeliveries._dead_letter__*", "unread=None", _FALSY),
    ("MemoryDeliveries._reclaim_pending__*", "",
     "equivalent: a pending delivery whose mail was all read has no members left to claim, "
     "whatever state or stamp it is left in"),
)


def reason_for(short: str, diff: str) -> str:
    for pattern, fragment, reason in RULES:
        if fnmatchcase(short, pattern) and fragment in diff:
            return reason
    return "not yet triaged"
