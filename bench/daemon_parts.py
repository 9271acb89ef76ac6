"""The moving parts of the daemon benchmarks (``bench_daemon``): the daemon child, the senders.

Run as a script with ``harness DB`` it is the daemon child: the real ``Daemon`` under anyio +
uvloop, exactly as ``serve`` wires it, except that the channel is an in-process one that confirms
at once and the store wrapper stamps ``time.monotonic()`` in the worker thread right after the
ack's COMMIT (one JSON line per ack on stdout). The load on it: ``daemon_load``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import clean_env, page_size_pragma

BODY = ("Build step 3 finished; 14 files changed, tests green. Next: review the store module "
        "and the CLI error paths, then report back with the diff summary. ")
SENDER = "bench-sender"
PRAGMAS = ("PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL")
INSERT = (
    "INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority, thread_id,"
    " payload, read, created_at, broadcast_id) VALUES (?, ?, ?, ?, ?, 'status', 'normal', NULL,"
    " NULL, 0, ?, NULL)"
)
WAKE_LINE = b'{"v": 1, "cmd": "wake", "args": {"agents": ["agent-0"]}}\n'
TRIVIAL_SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(64)
print("ready", flush=True)
reply = b'{"v": 1, "ok": true, "result": {"woken": ["agent-0"]}}\n'
while True:
    c, _ = s.accept()
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = c.recv(65536)
        if not chunk:
            break
        buf += chunk
    c.sendall(reply)
    c.close()
"""
SENDERS = 2
SETTLE_S = 3.0
SLEEPER = "import time; time.sleep(3600)"


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def ms_line(xs: list[float]) -> str:
    return (f"p50 {1000 * pct(xs, 0.5):.2f} / p90 {1000 * pct(xs, 0.9):.2f} / p99 "
            f"{1000 * pct(xs, 0.99):.2f} / max {1000 * max(xs):.2f} ms")


def _when_committed(sync: Any, fn: Callable[[], object]) -> None:
    """``fn`` right after the COMMIT of the call just made: at once on a store whose calls commit
    on their own (PostgreSQL: it has no ``after_commit``), after the group's COMMIT on SQLite."""
    after = getattr(sync, "after_commit", None)
    if after is None:
        fn()
    else:
        after(fn)


# -- the daemon child (harness) ---------------------------------------------------------------
def _harness_types(*, pg: bool = False) -> tuple[type, type]:
    """The instant channel and the phase-stamping store wrapper of the daemon child (``pg``:
    over ``PgAsyncMailStore``, whose claim and ack run in the event loop: stamped on return)."""
    from agentmaild.channels.base import Channel
    from agentmaild.models import Attempt, Batch
    from agentmaild.store.aio import AsyncMailStore
    from agentmaild.store.hops import groupable

    delivered: dict[str, tuple[Batch, list[float]]] = {}
    claimed: dict[str, list[float]] = {}
    out = sys.stdout

    class InstantChannel(Channel):
        kind = "bench"

        async def is_busy(self) -> bool:
            return False

        async def deliver(self, batch: Batch, text: str) -> None:
            stamps = claimed.pop(batch.delivery_id, [])
            delivered[batch.delivery_id] = (batch, [*stamps, time.monotonic()])  # confirmed

    class TimedStore(AsyncMailStore):
        """Stamps each phase; ``time.monotonic()`` in the worker thread right after COMMIT (of
        the group the call joined, when it shared a transaction: ``after_commit``)."""

        async def claim(self, agent: str, **kw: Any) -> Batch | None:
            t_in = time.monotonic()
            done: list[float] = []

            @groupable
            def claim() -> tuple[Batch | None, float]:
                t_run = time.monotonic()
                batch = self.sync.claim(agent, **kw)
                _when_committed(self.sync, lambda: done.append(time.monotonic()))
                return batch, t_run

            batch, t_run = await self.run_sync(claim)
            t_done = done[0]
            if batch is not None:
                claimed[batch.delivery_id] = [t_in, t_run, t_done, time.monotonic()]
            return batch

        async def ack_delivery(
            self, delivery_id: str, *, now: float, record: Attempt | None = None
        ) -> int:
            t_in = time.monotonic()

            done: list[float] = []

            @groupable
            def ack() -> tuple[int, float]:
                t_run = time.monotonic()
                n = self.sync.ack_delivery(delivery_id, now=now, record=record)
                _when_committed(self.sync, lambda: done.append(time.monotonic()))
                return n, t_run

            n, t_run = await self.run_sync(ack)
            t = done[0]
            batch, stamps = delivered.pop(delivery_id, (None, []))
            if batch is not None:
                t0 = [float(m.subject[3:]) for m in batch.messages if m.subject.startswith("t0=")]
                out.write(json.dumps({"t": t, "t0": t0, "ph": [*stamps, t_in, t_run, t]}) + "\n")
                out.flush()
            return n

    if not pg:
        return InstantChannel, TimedStore
    return InstantChannel, _timed_pg_type(claimed, delivered)


def _timed_pg_type(claimed: dict[str, list[float]], delivered: dict[str, tuple[Any, list[float]]]
                   ) -> type:
    """``TimedStore``'s stamps over ``PgAsyncMailStore``: a call's "hop" stamps coincide (its
    claim and ack run in the event loop), the commit is stamped when the answer is back."""
    from agentmaild.models import Attempt, Batch
    from agentmaild.store.aio_postgres import PgAsyncMailStore

    out = sys.stdout

    class TimedPgStore(PgAsyncMailStore):
        async def claim(self, agent: str, **kw: Any) -> Batch | None:
            t_in = time.monotonic()
            batch = await super().claim(agent, **kw)
            t_done = time.monotonic()
            if batch is not None:
                claimed[batch.delivery_id] = [t_in, t_in, t_done, t_done]
            return batch

        async def ack_delivery(
            self, delivery_id: str, *, now: float, record: Attempt | None = None
        ) -> int:
            t_in = time.monotonic()
            n = await super().ack_delivery(delivery_id, now=now, record=record)
            t = time.monotonic()
            batch, stamps = delivered.pop(delivery_id, (None, []))
            if batch is not None:
                t0 = [float(m.subject[3:]) for m in batch.messages if m.subject.startswith("t0=")]
                out.write(json.dumps({"t": t, "t0": t0, "ph": [*stamps, t_in, t_in, t]}) + "\n")
                out.flush()
            return n

    return TimedPgStore


def _harness_main(db: str) -> None:
    """The real Daemon with an instant in-process channel; one JSON line per ack on stdout."""
    import anyio

    from agentmaild.config import load_config
    from agentmaild.daemon.serve import Daemon
    from agentmaild.log import configure_logging
    from agentmaild.store.kinds import open_services
    from agentmaild.store.location import StoreLocation
    from agentmaild.store.sqlite import SqliteMailStore

    InstantChannel, TimedStore = _harness_types()

    class BenchDaemon(Daemon):
        def _make_channel(self, agent: Any, config: Any) -> Any:
            return InstantChannel()

    config = load_config()
    configure_logging(config.log.level, config.log.format, config.log.file)
    services = open_services(StoreLocation.of(db), config)  # as serve opens them
    services.facade = TimedStore

    holds = _count_lock_holds(SqliteMailStore)

    async def main() -> int:
        store = await services.open_store()
        gate = await services.open_gate()
        try:
            return await BenchDaemon(services, config, store, gate).run()
        finally:
            await gate.aclose()
            with anyio.CancelScope(shield=True):
                await store.aclose()
            hops = store.hops  # how many store calls shared a worker-thread hop
            print(f"harness: {hops.calls} store calls in {hops.hops} hops, "
                  f"{getattr(hops, 'inline', 0)} quick reads and "
                  f"{getattr(hops, 'inline_writes', 0)} writes inline", file=sys.stderr)
            print(json.dumps({"holds": holds}), flush=True)  # the last line: see Harness

    with services.hold():
        sys.exit(anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True}))


def _count_lock_holds(cls: Any) -> list[list[float]]:
    """Make ``cls`` (SqliteMailStore) note how long each of its transactions held SQLite's
    write lock: from BEGIN IMMEDIATE's success to the end of its COMMIT, one transaction of one
    call or of a group of calls. Rows ``[monotonic start, seconds held, calls]``, appended in
    the thread that ran it (list.append is atomic)."""
    holds: list[list[float]] = []
    begin, grouped, write = cls._begin, cls.run_grouped, cls._write

    def timed_begin(self: Any, conn: Any) -> None:
        begin(self, conn)
        self.bench_locked_at = time.monotonic()

    def note(self: Any, calls: int) -> None:
        at = getattr(self, "bench_locked_at", None)
        if at is not None:
            holds.append([at, time.monotonic() - at, calls])
            self.bench_locked_at = None

    def timed_grouped(self: Any, calls: Any) -> None:
        self.bench_locked_at = None
        grouped(self, calls)
        note(self, len(calls))

    def timed_write(self: Any, fn: Any) -> Any:
        if self._grouped is not None:  # a call inside a group: the group's transaction
            return write(self, fn)
        self.bench_locked_at = None
        try:
            return write(self, fn)
        finally:
            note(self, 1)

    cls._begin, cls.run_grouped, cls._write = timed_begin, timed_grouped, timed_write
    return holds


def lock_share(holds: list[list[float]], start: float, end: float) -> dict[str, float]:
    """The daemon's write-lock figures over ``[start, end]`` from ``_count_lock_holds`` rows."""
    inside = [h for h in holds if start <= h[0] <= end]
    held = sorted(h[1] for h in inside)
    return {"share": sum(held) / max(end - start, 1e-9), "n": len(held),
            "p50": pct(held, 0.5) if held else 0.0, "p99": pct(held, 0.99) if held else 0.0,
            "calls": sum(h[2] for h in inside) / max(len(inside), 1)}


def make_store(db: Path, agents: list[str]) -> None:
    from agentmaild.models import Agent
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(db)
    try:
        for name in agents:
            store.add_agent(Agent(name=name, capability="builder", channel="spawn",
                                  command=("true",)))
    finally:
        store.close()


def socket_of(db: Path) -> Path:
    from agentmaild.control.protocol import socket_path_for

    return socket_path_for(db)


def wait_loops(sock: Path, n: int, proc: subprocess.Popen[Any], timeout: float = 60.0) -> float:
    """Seconds until the daemon on ``sock`` reports ``n`` loops, every one idle."""
    from agentmaild.control.client import request

    start = time.monotonic()
    seen: Any = "no answer"
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited early with status {proc.returncode}")
        with contextlib.suppress(Exception):
            loops = request(sock, "agents", timeout=5.0)["agents"]
            seen = sorted({str(r["state"]) for r in loops}), len(loops)
            if len(loops) == n and all(r["state"] == "idle" for r in loops):
                return time.monotonic() - start
        time.sleep(0.05)
    raise RuntimeError(f"daemon on {sock} did not start {n} idle loops within {timeout:.0f} s "
                       f"(last seen: states, loops = {seen})")


def stop_proc(proc: subprocess.Popen[Any], timeout: float = 20.0) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class ChildHarness:
    """A daemon child that prints one JSON line per ack; ``acks`` collects them as they arrive
    (each row: the ack time ``t`` and the send times ``t0`` of its messages)."""

    sock: Path

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path, logpath: Path,
               n_agents: int) -> None:
        self.logpath = logpath
        self.log = logpath.open("w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env, cwd=str(cwd))
        self.acks: list[dict[str, Any]] = []
        self.holds: list[list[float]] = []  # the daemon's write-lock holds, known after stop()
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        try:
            self.startup_s = wait_loops(self.sock, n_agents, self.proc)
        except RuntimeError as exc:
            self.log.flush()
            tail = logpath.read_text(errors="replace").splitlines()[-5:]
            raise RuntimeError("\n".join([str(exc), f"{logpath} ends:", *tail])) from None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            row = json.loads(line)
            with self.cond:
                if "holds" in row:  # the SQLite harness's last line (``_count_lock_holds``)
                    self.holds = row["holds"]
                else:
                    self.acks.append(row)
                self.cond.notify_all()

    def wait_acks(self, count: int, timeout: float) -> bool:
        """Until ``count`` messages (not batches) have been acked in total."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.acked() < count:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    return False
                self.cond.wait(left)
        return True

    def acked(self) -> int:
        return sum(len(row["t0"]) for row in self.acks)

    def latencies(self, since: int = 0) -> list[float]:
        with self.cond:
            return [row["t"] - t0 for row in self.acks[since:] for t0 in row["t0"]]

    def stop(self) -> None:
        rc = stop_proc(self.proc)
        self.reader.join(5)
        self.log.close()
        if rc not in (0, None):
            tail = self.logpath.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"daemon harness exited {rc}:\n{tail}")


class Harness(ChildHarness):
    """The SQLite daemon child of the daemon, dashboard and ask benches."""

    def __init__(self, tmp: Path, name: str, agents: list[str]) -> None:
        self.db = tmp / name / "mail.db"
        self.db.parent.mkdir()
        self.agents = agents
        make_store(self.db, agents)
        self.sock = socket_of(self.db)
        self._spawn([sys.executable, __file__, "harness", str(self.db)], clean_env(str(tmp)), tmp,
                    self.db.parent / "daemon.log", len(agents))



# -- the floor of the woken latency ----------------------------------------------------------
class Floor:
    """INSERT (stdlib sqlite3, same DDL and PRAGMAs) + one socket round trip + one SELECT."""

    def __init__(self, tmp: Path, ddl_db: Path) -> None:
        src = sqlite3.connect(ddl_db)
        ddl = [r[0] for r in src.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'messages' AND sql IS NOT NULL "
            "ORDER BY type DESC, name")]
        src.close()
        self.conn = sqlite3.connect(tmp / "floor.db", isolation_level=None, timeout=5.0)
        for stmt in (page_size_pragma(ddl_db), *PRAGMAS, *ddl):
            self.conn.execute(stmt)
        self.path = str(tmp / "floor.sock")
        self.server = subprocess.Popen([sys.executable, "-c", TRIVIAL_SERVER, self.path],
                                       stdout=subprocess.PIPE, text=True)
        assert self.server.stdout is not None
        if self.server.stdout.readline().strip() != "ready":
            raise RuntimeError("trivial socket server did not start")
        self.i = 0

    def once(self) -> float:
        self.i += 1
        mid = f"msg-floor{self.i:012d}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        start = time.monotonic()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(INSERT, (mid, SENDER, "agent-0", "floor", BODY, stamp))
        self.conn.execute("COMMIT")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(self.path)
            s.sendall(WAKE_LINE)
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        row = self.conn.execute("SELECT read FROM messages WHERE id = ?", (mid,)).fetchone()
        elapsed = time.monotonic() - start
        assert row is not None
        assert buf.endswith(b"\n")
        return elapsed

    def close(self) -> None:
        self.conn.close()
        self.server.kill()
        self.server.wait()



# -- process CPU ------------------------------------------------------------------------------
def cpu_s(pid: int) -> float:
    """utime + stime of the whole process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> tuple[int, int]:
    """(context switches summed over every thread, thread count)."""
    total, threads = 0, 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/status") as f:
            threads += 1
            total += sum(int(line.split()[-1]) for line in f if "ctxt_switches:" in line)
    return total, threads


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "harness":
        _harness_main(sys.argv[2])
    else:
        sys.exit("usage: daemon_parts.py harness DB")
