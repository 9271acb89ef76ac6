"""The measurements of bench_postgres.py (see its docstring); ``run(quick)`` returns the figures."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from bench_postgres import UNDER_LOAD, PgHarness, _add_agents, _server
from benchlib import Figure
from daemon_parts import BODY, SENDER, ms_line, pct

_FLOOR_DDL = ("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, to_agent text, "
              "body text, claimed integer NOT NULL DEFAULT 0)")
_FLOOR_CLAIM = (
    "UPDATE bench_floor SET claimed = 1 WHERE id = (SELECT id FROM bench_floor WHERE claimed = 0 "
    "AND to_agent = %s ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id"
)
_INSERT = (
    "INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority, thread_id,"
    " payload, read, created_at, broadcast_id) VALUES (%s, %s, %s, %s, %s, 'status', 'normal',"
    " NULL, NULL, 0, %s, NULL)"
)


# -- (1) woken send→ack ---------------------------------------------------------------------
class Floor:
    """Bare psycopg: INSERT + NOTIFY (one transaction), LISTEN gets it, claim the row."""

    def __init__(self, dsn: str) -> None:
        self.send = psycopg.connect(dsn, autocommit=True)
        self.listen = psycopg.connect(dsn, autocommit=True)
        self.send.execute(_FLOOR_DDL)
        self.listen.execute("LISTEN bench_floor")

    def once(self, agent: str) -> float:
        t0 = time.monotonic()
        with self.send.transaction():
            self.send.execute("INSERT INTO bench_floor (to_agent, body) VALUES (%s, %s)",
                              (agent, BODY))
            self.send.execute("SELECT pg_notify('bench_floor', %s)", (agent,))
        notes = list(self.listen.notifies(timeout=10.0, stop_after=1))
        if not notes:
            raise RuntimeError("floor: no notification within 10 s")
        if self.listen.execute(_FLOOR_CLAIM, (notes[0].payload,)).fetchone() is None:
            raise RuntimeError("floor: the notified row was not there to claim")
        return time.monotonic() - t0

    def close(self) -> None:
        self.send.close()
        self.listen.close()


def bench_woken(tmp: Path, dsn: str, quick: bool) -> list[Figure]:
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.postgres import PostgresMailStore

    n = 60 if quick else 300
    agents = [f"agent-{i}" for i in range(20)]
    _add_agents(dsn, dict.fromkeys(agents, "host-a"))
    h = PgHarness(tmp, dsn, "host-a", agents)
    floor = Floor(dsn)
    store = PostgresMailStore(dsn)
    mailer = Mailer(store)
    ours: list[float] = []
    base: list[float] = []
    phases: list[list[float]] = []
    try:
        for i in range(n + 10):  # the first 10 warm caches and connections; dropped
            agent = agents[i % 5]
            time.sleep(0.005)
            fl = floor.once(agent)
            time.sleep(0.005)
            k = h.acked()
            t0 = time.monotonic()
            mailer.send(sender=SENDER, to=agent, subject=f"t0={t0!r}", body=BODY)
            t1 = time.monotonic()
            if not h.wait_acks(k + 1, 10.0):
                raise RuntimeError(f"woken send {i} was not acked within 10 s")
            if i >= 10:
                row = h.acks[-1]
                ours.append(row["t"] - t0)
                base.append(fl)
                ph = row["ph"]  # claim in/run/done/back, delivered, ack in/run/done
                phases.append([t1 - t0, ph[0] - t1, ph[1] - ph[0], ph[2] - ph[1],
                               ph[3] - ph[2], ph[4] - ph[3], ph[5] - ph[4], ph[6] - ph[5],
                               ph[7] - ph[6]])
    finally:
        store.close()
        floor.close()
        h.stop()
    names = ("Mailer.send", "send commit → claim called", "claim thread hop", "claim txn",
             "claim hop back", "deliver (re-read, render, inject)", "delivered → ack called",
             "ack thread hop", "ack txn")
    cols = list(zip(*phases, strict=True))
    where = "; ".join(f"{name} {1000 * statistics.median(c):.2f}/{1000 * pct(list(c), 0.99):.2f}"
                      for name, c in zip(names, cols, strict=True))
    label = "bare psycopg INSERT + NOTIFY, LISTEN, claim"
    p50, p99 = 1000 * pct(ours, 0.5), 1000 * pct(ours, 0.99)
    return [
        Figure(name="PostgreSQL send→ack woken p50 (ms)", ours=p50, unit="ms",
               baseline=1000 * pct(base, 0.5), baseline_label=label, target=("<=", 5.0),
               target_on="ours", notes=[
                   f"{n} sends one at a time, round robin over 5 agents (20 registered), "
                   f"interleaved with the baseline; no poke: the send's NOTIFY is the only "
                   f"wake-up; ours {ms_line(ours)}; baseline {ms_line(base)}; {UNDER_LOAD}",
                   f"where the time goes, median/p99 ms: {where}"]),
        Figure(name="PostgreSQL send→ack woken p99 (ms)", ours=p99, unit="ms",
               baseline=1000 * pct(base, 0.99), baseline_label=label),
    ]


# -- (2) single sends -----------------------------------------------------------------------
def bench_single(dsn: str, quick: bool) -> Figure:
    from agentmaild.ids import iso_now, new_id
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.postgres import PostgresMailStore

    # Fine interleaving: on a shared machine ours and the baseline then see the same load. The
    # side that goes first alternates: each side's first sends after the other's run on a
    # server process (one per connection) that sat idle meanwhile, which costs it tens of µs a
    # send; a fixed order put that on one side only.
    n, step = (200, 20) if quick else (2000, 20)
    agents = [f"single-{i:03d}" for i in range(100)]
    _add_agents(dsn, dict.fromkeys(agents, "host-a"))
    store = PostgresMailStore(dsn)
    mailer = Mailer(store)
    bare = psycopg.connect(dsn, autocommit=True)

    def ours(ids: range) -> float:
        start = time.perf_counter()
        for i in ids:
            mailer.send(sender=SENDER, to=agents[i % 100], subject=f"step {i}", body=BODY)
        return time.perf_counter() - start

    def baseline(ids: range) -> float:
        start = time.perf_counter()
        for i in ids:
            bare.execute(_INSERT, (new_id("msg"), SENDER, agents[i % 100], f"step {i}", BODY,
                                   iso_now()))
        return time.perf_counter() - start

    t_o = t_b = 0.0
    try:
        for lo in range(0, n, step):
            ids = range(lo, lo + step)
            if lo // step % 2:
                t_b += baseline(ids)
                t_o += ours(ids)
            else:
                t_o += ours(ids)
                t_b += baseline(ids)
    finally:
        store.close()
        bare.close()
    return Figure(
        name="PostgreSQL single sends (messages/s)", ours=n / t_o, baseline=n / t_b,
        unit="msg/s", baseline_label="bare psycopg INSERT, 1 txn/row", target=(">=", 0.5),
        notes=[f"{n} sends to 100 agents round robin, interleaved every {step} sends (the side "
               f"that goes first alternating); per send: "
               f"ours {1e6 * t_o / n:.0f} µs, baseline {1e6 * t_b / n:.0f} µs; {UNDER_LOAD}"],
    )


# -- (3) claims: 2 daemons x 10 agents vs 1 daemon x 20 ----------------------------------------
def _claims(tmp: Path, dsn: str, hosts: dict[str, list[str]], n: int) -> dict[str, Any]:
    from agentmaild.control.client import request
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.postgres import PostgresMailStore

    agents = [a for names in hosts.values() for a in names]
    _add_agents(dsn, {a: h for h, names in hosts.items() for a in names})
    one_each = {"AGENTMAILD_DAEMON_BATCH_MAX_MESSAGES": "1"}  # a claim per message
    daemons = [PgHarness(tmp, dsn, host, names, env=one_each) for host, names in hosts.items()]
    store = PostgresMailStore(dsn)
    try:
        for d in daemons:  # the backlog is written while every loop is paused
            request(d.sock, "pause")
        mailer = Mailer(store)
        for i in range(n):
            mailer.send(sender=SENDER, to=agents[i % len(agents)], subject="t0=0.0",
                        body=f"{BODY} #{i}")  # not collapsed as a repeat
        start = time.monotonic()
        for d in daemons:
            request(d.sock, "resume")
        for d in daemons:
            if not d.wait_acks(n * len(d.agents) // len(agents), 120.0):
                raise RuntimeError(f"claims: {d.acked()} of the host's messages acked in 120 s")
        elapsed = max(row["t"] for d in daemons for row in d.acks) - start
        total = sum(d.acked() for d in daemons)
        rows = store.list_messages(limit=n + 100)
        acked = [m for m in rows if m.to_agent in agents and m.acked_at]
    finally:
        store.close()
        for d in daemons:
            d.stop()
    double = sum(1 for m in acked if m.acked_by != m.delivery_id)
    double += max(0, total - n)  # a message acked by two deliveries shows up twice
    return {"rate": n / elapsed, "double": double, "acked": len(acked)}


def bench_claims(tmp: Path, databases: Any, quick: bool) -> list[Figure]:
    n = 200 if quick else 1000
    one = _claims(tmp / "one", databases.create(),
                  {"host-a": [f"c-{i}" for i in range(20)]}, n)
    two = _claims(tmp / "two", databases.create(),
                  {"host-a": [f"c-{i}" for i in range(10)],
                   "host-b": [f"c-{i}" for i in range(10, 20)]}, n)
    note = (f"{n} messages written to 20 agents while the daemons' loops are paused, then "
            f"resumed: one claim per message (batch_max_messages = 1), acked through the instant "
            f"channel; rate = messages / (resume to last ack); 1 daemon: "
            f"{one['rate']:.0f} msg/s, {one['acked']} acked, {one['double']} double; "
            f"2 daemons: {two['rate']:.0f} msg/s, {two['acked']} acked, "
            f"{two['double']} double; {UNDER_LOAD}")
    return [
        Figure(name="PostgreSQL claims, 2 daemons x 10 agents: double claims", ours=two["double"],
               baseline=one["double"], baseline_label="1 daemon x 20 agents", ratio=None,
               target=("==", 0), target_on="ours", notes=[note]),
        Figure(name="PostgreSQL claims, 2 daemons x 10 agents (messages/s)", ours=two["rate"],
               baseline=one["rate"], unit="msg/s", baseline_label="1 daemon x 20 agents"),
    ]


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="agentmaild-pg-bench-") as d, _server() as dbs:
        tmp = Path(d)
        (tmp / "woken").mkdir()
        (tmp / "one").mkdir()
        (tmp / "two").mkdir()
        figures = bench_woken(tmp / "woken", dbs.create(), quick)
        figures.append(bench_single(dbs.create(), quick))
        figures += bench_claims(tmp, dbs, quick)
    return figures
