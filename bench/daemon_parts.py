"""The moving parts of the daemon benchmarks (``bench_daemon``): the daemon child, the senders.

Run as a script with ``harness DB`` it is the daemon child: the real ``Daemon`` under anyio +
uvloop, exactly as ``serve`` wires it, except that the channel is an in-process one that confirms
at once and the store wrapper stamps ``time.monotonic()`` in the worker thread right after the
ack's COMMIT (one JSON line per ack on stdout). With ``sender DB RATE DURATION AGENT...`` it is a
sender process (``Mailer.send`` + poke per message, as the CLI does; RATE 0: as fast as it can);
with ``raw DB DURATION`` the baseline writer (stdlib sqlite3, one INSERT per transaction).
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
from pathlib import Path
from typing import Any

from benchlib import clean_env

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


# -- the daemon child (harness) ---------------------------------------------------------------
def _harness_types() -> tuple[type, type]:
    """The instant channel and the phase-stamping store wrapper of the daemon child."""
    from agentmaild.channels.base import Channel
    from agentmaild.models import Attempt, Batch
    from agentmaild.store.aio import AsyncMailStore

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
        """Stamps each phase; ``time.monotonic()`` in the worker thread right after COMMIT."""

        async def claim(self, agent: str, **kw: Any) -> Batch | None:
            t_in = time.monotonic()

            def claim() -> tuple[Batch | None, float, float]:
                t_run = time.monotonic()
                return self.sync.claim(agent, **kw), t_run, time.monotonic()

            batch, t_run, t_done = await self.run_sync(claim)
            if batch is not None:
                claimed[batch.delivery_id] = [t_in, t_run, t_done, time.monotonic()]
            return batch

        async def ack_delivery(
            self, delivery_id: str, *, now: float, record: Attempt | None = None
        ) -> int:
            t_in = time.monotonic()

            def ack() -> tuple[int, float, float]:
                t_run = time.monotonic()
                n = self.sync.ack_delivery(delivery_id, now=now, record=record)
                return n, t_run, time.monotonic()

            n, t_run, t = await self.run_sync(ack)
            batch, stamps = delivered.pop(delivery_id, (None, []))
            if batch is not None:
                t0 = [float(m.subject[3:]) for m in batch.messages if m.subject.startswith("t0=")]
                out.write(json.dumps({"t": t, "t0": t0, "ph": [*stamps, t_in, t_run, t]}) + "\n")
                out.flush()
            return n

    return InstantChannel, TimedStore


def _harness_main(db: str) -> None:
    """The real Daemon with an instant in-process channel; one JSON line per ack on stdout."""
    import anyio

    from agentmaild.config import load_config
    from agentmaild.daemon.lock import hold_lock
    from agentmaild.daemon.serve import Daemon
    from agentmaild.log import configure_logging
    from agentmaild.store.aio import PollGate
    from agentmaild.store.sqlite import SqliteMailStore

    InstantChannel, TimedStore = _harness_types()

    class BenchDaemon(Daemon):
        def _make_channel(self, agent: Any, config: Any) -> Any:
            return InstantChannel()

    config = load_config()
    configure_logging(config.log.level, config.log.format, config.log.file)
    path = Path(db)

    async def main() -> int:
        store = TimedStore(SqliteMailStore(path))
        gate = await PollGate.open(path)
        try:
            return await BenchDaemon(path, config, store, gate).run()
        finally:
            await gate.aclose()
            with anyio.CancelScope(shield=True):
                await store.aclose()

    with hold_lock(path):
        sys.exit(anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True}))


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
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited early with status {proc.returncode}")
        with contextlib.suppress(Exception):
            loops = request(sock, "agents", timeout=5.0)["agents"]
            if len(loops) == n and all(r["state"] == "idle" for r in loops):
                return time.monotonic() - start
        time.sleep(0.05)
    raise RuntimeError(f"daemon on {sock} did not start {n} idle loops within {timeout:.0f} s")


def stop_proc(proc: subprocess.Popen[Any], timeout: float = 20.0) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class Harness:
    """The daemon child; ``acks`` collects (ack time, [send times]) as its lines arrive."""

    def __init__(self, tmp: Path, name: str, agents: list[str]) -> None:
        self.db = tmp / name / "mail.db"
        self.db.parent.mkdir()
        self.agents = agents
        make_store(self.db, agents)
        self.sock = socket_of(self.db)
        self.log = open(self.db.parent / "daemon.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "harness", str(self.db)], stdout=subprocess.PIPE,
            stderr=self.log, text=True, env=clean_env(str(tmp)), cwd=str(tmp),
        )
        self.acks: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.startup_s = wait_loops(self.sock, len(agents), self.proc)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            row = json.loads(line)
            with self.cond:
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
            tail = (self.db.parent / "daemon.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"daemon harness exited {rc}:\n{tail}")



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
        for stmt in (*PRAGMAS, *ddl):
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


# -- (4) WAL under sustained load -------------------------------------------------------------
def _sender_main(db: str, rate: float, duration: float, agents: list[str]) -> None:
    """Sends (Mailer.send + poke, as the CLI does) paced to ``rate`` a second, or as fast as it
    can when ``rate`` is 0, for ``duration`` seconds; one JSON summary line at the end."""
    from agentmaild.control.client import poke
    from agentmaild.mail import Mailer
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(db)
    mailer = Mailer(store)
    sock = socket_of(Path(db))
    errors: list[str] = []
    waits: list[float] = []
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    i = 0
    while (due := start + (i / rate if rate > 0 else time.monotonic() - start)) < start + duration:
        if (ahead := due - time.monotonic()) > 0:
            time.sleep(ahead)
        agent = agents[i % len(agents)]
        t0 = time.monotonic()
        try:
            mailer.send(sender=SENDER, to=agent, subject=f"t0={t0!r}", body=BODY)
            poke(sock, [agent])
        except Exception as exc:  # every escaped error is part of the figure
            errors.append(f"{type(exc).__name__}: {exc}")
        waits.append(time.monotonic() - t0)
        i += 1
    elapsed = time.monotonic() - start
    store.close()
    print(json.dumps({"sent": i, "elapsed": elapsed, "errors": len(errors),
                      "first_error": errors[0] if errors else "", "p50": pct(waits, 0.5),
                      "p99": pct(waits, 0.99)}), flush=True)


class WalSampler(threading.Thread):
    def __init__(self, db: Path) -> None:
        super().__init__(daemon=True)
        self.wal = f"{db}-wal"
        self.samples: list[tuple[float, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.05):
            try:
                size = os.path.getsize(self.wal)
            except OSError:
                size = 0
            self.samples.append((time.monotonic(), size))


def wal_resets(samples: list[tuple[float, int]], start: float, end: float
                ) -> tuple[int, int, float]:
    """(times the -wal file shrank, i.e. was truncated; bytes it grew by; longest gap between)."""
    resets, grown, last, gap, prev = 0, 0, start, 0.0, 0
    for t, size in samples:
        if not start <= t <= end:
            continue
        if size < prev:  # only a TRUNCATE checkpoint (or the last close) shrinks the file
            resets += 1
            gap, last = max(gap, t - last), t
            grown += size
        else:
            grown += size - prev
        prev = size
    return resets, grown, max(gap, end - last)


def run_senders(h: Harness, rate: float, duration: float, senders: int) -> dict[str, Any]:
    """``senders`` processes, each paced to ``rate / senders`` (0: unpaced), released together."""
    argv = [sys.executable, __file__, "sender", str(h.db), str(rate / senders), str(duration)]
    return _released([[*argv, *(h.agents[k::senders] or h.agents)] for k in range(senders)],
                     duration)


def _released(argvs: list[list[str]], duration: float) -> dict[str, Any]:
    """Start every process, wait for its "ready", release them together; their summed rows."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for argv in argvs]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{p.args!r} did not start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        rows = [json.loads(p.communicate(timeout=duration + 120)[0].strip().splitlines()[-1])
                for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return {"sent": sum(r["sent"] for r in rows), "elapsed": max(r["elapsed"] for r in rows),
            "errors": sum(r["errors"] for r in rows),
            "first_error": next((r["first_error"] for r in rows if r["first_error"]), ""),
            "p50": max(r["p50"] for r in rows), "p99": max(r["p99"] for r in rows)}


def _raw_main(db: str, duration: float) -> None:
    """The baseline writer: single-row INSERT + COMMIT as fast as it can, for ``duration``."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=5.0)
    for stmt in PRAGMAS:
        conn.execute(stmt)
    print("ready", flush=True)
    sys.stdin.readline()
    start, i, tag = time.monotonic(), 0, os.getpid()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    while time.monotonic() - start < duration:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, (f"msg-raw{tag}-{i:012d}", SENDER, f"agent-{i % 50}", "raw", BODY,
                              stamp))
        conn.execute("COMMIT")
        i += 1
    elapsed = time.monotonic() - start
    conn.close()
    print(json.dumps({"sent": i, "elapsed": elapsed, "errors": 0, "first_error": "",
                      "p50": 0.0, "p99": 0.0}), flush=True)


def raw_baseline(ddl_db: Path, tmp: Path, duration: float, writers: int) -> dict[str, Any]:
    """``writers`` raw writer processes on a fresh file with the messages DDL of ``ddl_db``."""
    db = tmp / "raw.db"
    src = sqlite3.connect(ddl_db)
    ddl = [r[0] for r in src.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'messages' AND sql IS NOT NULL "
        "ORDER BY type DESC, name")]
    src.close()
    conn = sqlite3.connect(db, isolation_level=None)
    for stmt in (*PRAGMAS, *ddl):
        conn.execute(stmt)
    conn.close()
    argv = [sys.executable, __file__, "raw", str(db), str(duration)]
    return _released([argv] * writers, duration)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "harness":
        _harness_main(sys.argv[2])
    elif len(sys.argv) >= 6 and sys.argv[1] == "sender":
        _sender_main(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:])
    elif len(sys.argv) == 4 and sys.argv[1] == "raw":
        _raw_main(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit("usage: daemon_parts.py harness DB | sender DB RATE S AGENT... | raw DB S")
