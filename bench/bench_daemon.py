"""Daemon benchmarks (issues 3, 6 and 15): latency, throughput, idle cost, WAL growth, CLI send.

(1) send→ack latency, *woken*: the real ``Daemon`` in a child process (``daemon_parts``: control
    server, wake socket, supervisor, per-agent loops, checkpoints) with an in-process channel
    that confirms at once. This process sends: ``Mailer.send`` + ``control.client.poke`` (a wake
    datagram, as the CLI does), then waits for the child's ack report. CLOCK_MONOTONIC is one clock
    for both processes. Messages go one at a time, round robin over 5 agents, 5 ms apart.
    Baseline, the *floor*, interleaved with it: stdlib ``sqlite3`` INSERT (same DDL and PRAGMAs) +
    one Unix-socket request/reply to a trivial server process + one SELECT of the row.
(2) the same without the poke: the supervisor's poll tick (default 2 s) finds the mail; informative.
(3) sustained load (issue 15): 2 sender processes, each sending as fast as it can (``Mailer.send``
    + poke per message) round robin to 50 agents of the same daemon, for a fixed time: messages
    acked per second, send→ack p50/p99, the daemon's CPU, the peak ``-wal`` size. Baseline, same
    run: 2 processes of stdlib sqlite3 single-row INSERT + COMMIT on the same DDL.
(4) idle CPU: ``agentmaild serve`` with 1,000 registered spawn agents (command ``true``), no mail;
    utime+stime from ``/proc/<pid>/stat``; baseline a sleeping ``python -c``.
(5) one ``agentmaild send`` as a cold process (the daemon running: it pokes it) beside
    ``python -c "import sqlite3, json"``, interleaved.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import Figure, agentmaild_script, clean_env, fmt, median
from daemon_load import WalSampler, raw_baseline, run_senders, wal_resets
from daemon_parts import (
    BODY,
    SENDER,
    SETTLE_S,
    SLEEPER,
    Floor,
    Harness,
    cpu_s,
    lock_share,
    make_store,
    ms_line,
    pct,
    socket_of,
    stop_proc,
    switches,
    wait_loops,
)

# -- (1), (2) woken and polled latency ----------------------------------------------------
PHASES = ("Mailer.send", "poke round trip", "send commit → claim starts", "claim: hop to thread",
          "claim: txn", "claim: hop back", "render + deliver", "deliver → ack starts",
          "ack: hop to thread", "ack: txn")


def _phases(t0: float, t1: float, t2: float, ph: list[float]) -> list[float]:
    """Durations (s) of PHASES from the sender's stamps and the daemon's (see TimedStore)."""
    claim_in, claim_run, claim_done, claim_back, deliver, ack_in, ack_run, ack_done = ph
    return [t1 - t0, t2 - t1, claim_in - t1, claim_run - claim_in, claim_done - claim_run,
            claim_back - claim_done, deliver - claim_back, ack_in - deliver, ack_run - ack_in,
            ack_done - ack_run]


def _woken(h: Harness, floor: Floor, n: int) -> tuple[list[float], list[float], list[list[float]]]:
    """Interleaved: one floor measurement, then one woken send; returns latencies in seconds."""
    from agentmaild.control.client import poke
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(h.db)
    mailer = Mailer(store)
    ours: list[float] = []
    base: list[float] = []
    phases: list[list[float]] = []
    try:
        for i in range(n + 10):  # the first 10 warm caches and connections; dropped
            time.sleep(0.005)
            fl = floor.once()
            time.sleep(0.005)
            agent = h.agents[i % len(h.agents)]
            k = h.acked()
            t0 = time.monotonic()
            mailer.send(sender=SENDER, to=agent, subject=f"t0={t0!r}", body=BODY)
            t1 = time.monotonic()
            poke(h.sock, [agent])
            t2 = time.monotonic()
            if not h.wait_acks(k + 1, 10.0):
                raise RuntimeError(f"woken send {i} was not acked within 10 s")
            if i >= 10:
                row = h.acks[-1]
                ours.append(row["t"] - t0)
                base.append(fl)
                phases.append(_phases(t0, t1, t2, row["ph"]))
    finally:
        store.close()
    return ours, base, phases


def _breakdown(phases: list[list[float]]) -> str:
    cols = list(zip(*phases, strict=True))
    return "; ".join(f"{name} {1000 * statistics.median(c):.2f}/{1000 * pct(list(c), 0.99):.2f}"
                     for name, c in zip(PHASES, cols, strict=True))


def _polled(h: Harness, duration: float) -> tuple[list[float], int]:
    """Sends at random moments with no poke; the poll tick must find them."""
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(h.db)
    mailer = Mailer(store)
    rng = random.Random(7)
    since = len(h.acks)
    base_acked, sent = h.acked(), 0
    end = time.monotonic() + duration
    try:
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.02, 0.28))
            t0 = time.monotonic()
            mailer.send(sender=SENDER, to=rng.choice(h.agents), subject=f"t0={t0!r}", body=BODY)
            sent += 1
    finally:
        store.close()
    if not h.wait_acks(base_acked + sent, 10.0):
        raise RuntimeError(f"polled: {h.acked() - base_acked} of {sent} acked within 10 s")
    return h.latencies(since), sent


def bench_latency(tmp: Path, quick: bool) -> list[Figure]:
    n, poll_window = (60, 4.0) if quick else (300, 20.0)
    h = Harness(tmp, "latency", [f"agent-{i}" for i in range(20)])
    floor = Floor(tmp, h.db)
    try:
        h_agents, h.agents = h.agents, h.agents[:5]
        ours, base, phases = _woken(h, floor, n)
        h.agents = h_agents
        polled, sent = _polled(h, poll_window)
    finally:
        floor.close()
        h.stop()
    from agentmaild.config import DaemonConfig

    interval = DaemonConfig().poll_interval_s
    p50, p99, b50, b99 = (1000 * pct(ours, 0.5), 1000 * pct(ours, 0.99),
                          1000 * pct(base, 0.5), 1000 * pct(base, 0.99))
    raw = (f"{n} sends, one at a time 5 ms apart, round robin over 5 agents (20 registered), "
           f"interleaved with the floor; ours {ms_line(ours)}; floor {ms_line(base)}; daemon "
           f"start to 20 idle loops {h.startup_s:.2f} s")
    where = ("where the time goes, median/p99 ms per phase (the poke runs concurrently with the "
             f"daemon's work, so phases overlap): {_breakdown(phases)}")
    label = "floor: INSERT + socket round trip + SELECT"
    return [
        Figure(name="send→ack woken p50 (ms)", ours=p50, unit="ms", baseline=b50,
               baseline_label=label, target=("<=", 1.0), target_on="ours", notes=[
                   raw, "target from issue 15 (≤ 1.0 ms p50, ≤ 3.0 ms p99; issue 3's: 5 / 25 ms)",
                   "the real Daemon in a child process under anyio+uvloop (control server, "
                   "supervisor, loops, checkpoints), an in-process channel that confirms at once; "
                   "latency = before Mailer.send in the sender process → ack COMMIT in the "
                   "daemon's worker thread (CLOCK_MONOTONIC, shared by both processes)", where]),
        Figure(name="send→ack woken p99 (ms)", ours=p99, unit="ms", baseline=b99,
               baseline_label=label, target=("<=", 3.0), target_on="ours"),
        Figure(name="send→ack polled p50 (ms)", ours=1000 * pct(polled, 0.5), unit="ms",
               baseline=p50, baseline_label="woken, same run", notes=[
                   f"{sent} sends at random moments (uniform 20-280 ms apart) to 20 agents, no "
                   f"poke; poll interval {interval:g} s (the default); {ms_line(polled)}; mean "
                   f"{1000 * statistics.mean(polled):.0f} ms (SPEC §9: Overstory's 2 s polling "
                   "averages ~1 s). Informative: no target"]),
        Figure(name="send→ack polled p99 (ms)", ours=1000 * pct(polled, 0.99), unit="ms",
               baseline=p99, baseline_label="woken, same run"),
    ]


# -- (4) idle CPU -----------------------------------------------------------------------------
def _serve(tmp: Path, name: str, agents: int) -> tuple[subprocess.Popen[bytes], Path, float]:
    db = tmp / name / "mail.db"
    db.parent.mkdir()
    make_store(db, [f"idle-{i:04d}" for i in range(agents)])
    log = open(db.parent / "daemon.log", "wb")
    proc = subprocess.Popen([str(agentmaild_script()), "serve", "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=log, env=clean_env(str(tmp)),
                            cwd=str(tmp))
    log.close()
    return proc, db, wait_loops(socket_of(db), agents, proc, timeout=120.0)


def bench_idle(tmp: Path, quick: bool) -> list[Figure]:
    window, agents = (5.0, 1000) if quick else (20.0, 1000)
    full, _, start_s = _serve(tmp, "idle-1000", agents)
    empty, _, _ = _serve(tmp, "idle-0", 0)
    sleeper = subprocess.Popen([sys.executable, "-c", SLEEPER], env=clean_env(str(tmp)))
    procs = {"full": full, "empty": empty, "sleeper": sleeper}
    try:
        # Start-up is over before the window: 1,000 first claims, then the first poll tick (at
        # ~2 s) re-reads the whole registry once (~50 ms of CPU, seen in a per-second trace).
        time.sleep(SETTLE_S)
        before = {k: (cpu_s(p.pid), switches(p.pid)[0]) for k, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - t0
        after = {k: (cpu_s(p.pid), switches(p.pid)[0]) for k, p in procs.items()}
        threads = switches(full.pid)[1]
    finally:
        for p in (full, empty):
            stop_proc(p)
        sleeper.kill()
        sleeper.wait()
    pct = {k: 100 * (after[k][0] - before[k][0]) / elapsed for k in procs}
    wake = {k: (after[k][1] - before[k][1]) / elapsed for k in procs}
    tick = 100 / os.sysconf("SC_CLK_TCK") / elapsed
    return [Figure(
        name=f"idle CPU, {agents:,} registered agents (% of one core)", ours=pct["full"],
        unit="%", baseline=pct["sleeper"], baseline_label="python -c 'time.sleep(…)'",
        target=("<=", 1.0), target_on="ours", notes=[
            f"`agentmaild serve` with {agents:,} spawn agents (command `true`), no mail; "
            f"utime+stime from /proc/<pid>/stat over {elapsed:.1f} s (resolution {tick:.3f} %), "
            f"starting {SETTLE_S:g} s after start-up ({start_s:.1f} s to {agents:,} idle loops; "
            "the first poll tick's registry re-read, ~50 ms of CPU, falls before it); same window: "
            f"`serve` with 0 agents {pct['empty']:.3f} %, sleeping python {pct['sleeper']:.3f} %; "
            f"context switches/s (all threads): {agents:,} agents {wake['full']:.1f}, 0 agents "
            f"{wake['empty']:.1f}, sleeper {wake['sleeper']:.1f}; daemon threads {threads}"]),
    ]


# -- (3) sustained load ------------------------------------------------------------------------
def bench_sustained(tmp: Path, quick: bool) -> list[Figure]:
    agents, senders, duration = 50, 2, (5.0 if quick else 20.0)
    h = Harness(tmp, "sustained", [f"agent-{i}" for i in range(agents)])
    try:
        raw = raw_baseline(h.db, tmp, duration, senders)  # the daemon idles meanwhile
        sampler = WalSampler(h.db)
        sampler.start()
        t_start, cpu_start = time.monotonic(), cpu_s(h.proc.pid)
        sent = run_senders(h, 0.0, duration, senders)
        t_sent = time.monotonic()
        daemon_cpu = cpu_s(h.proc.pid) - cpu_start
        cpu = 100 * daemon_cpu / (t_sent - t_start)
        acked_at_end = h.acked()
        drained = h.wait_acks(sent["sent"], 120.0)
        drain_s = time.monotonic() - t_sent
        sampler.halt.set()
        sampler.join()
    finally:
        h.stop()
    lat = h.latencies()
    peak = max((s for _, s in sampler.samples), default=0) / 2**20
    resets, grown, gap = wal_resets(sampler.samples, t_start, t_sent)
    rate = acked_at_end / sent["elapsed"]
    rate_raw = raw["sent"] / raw["elapsed"]
    batch = len(lat) / max(len(h.acks), 1)
    load = (f"{senders} sender processes, each as fast as it can for {duration:g} s, Mailer.send +"
            f" poke per message (as the CLI does), round robin to {agents} agents whose in-process"
            f" channel confirms at once; sent {sent['sent']:,} in {sent['elapsed']:.1f} s "
            f"({sent['sent'] / sent['elapsed']:,.0f}/s), errors {sent['errors']}"
            + (f" (first: {sent['first_error']})" if sent["errors"] else "")
            + f"; acked by the end of sending {acked_at_end:,}, "
            f"{'all acked' if drained else 'NOT all acked'} {drain_s:.1f} s later; "
            f"{batch:.1f} messages per batch on average; sender's send+poke p50 "
            f"{1000 * sent['p50']:.2f} ms, p99 {1000 * sent['p99']:.2f} ms; daemon CPU while "
            f"sending {cpu:.0f} % of one core; load average at the end "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    lock = lock_share(h.holds, t_start, t_sent)
    waited = sent["lock_wait"] / max(senders * sent["elapsed"], 1e-9)
    daemon_us = 1e6 * daemon_cpu / max(acked_at_end, 1)
    where = ("where the time goes: SQLite's one write lock. The daemon held it "
             f"{100 * lock['share']:.0f} % of the time, in {lock['n']:,} transactions (p50 "
             f"{1000 * lock['p50']:.2f} ms, p99 {1000 * lock['p99']:.2f} ms, "
             f"{lock['calls']:.1f} store calls each); the senders spent {100 * waited:.0f} % of "
             "their time waiting for it (BEGIN IMMEDIATE), and "
             f"{1e6 * sent['cpu'] / max(sent['sent'], 1):.0f} µs of CPU per send; the daemon "
             f"{daemon_us:.0f} µs of CPU per message acked (5,000 msg/s within one core leaves "
             "200 µs a message)")
    base = (f"baseline, same run, before the load: {senders} processes of stdlib sqlite3 (same "
            f"DDL and PRAGMAs) single-row INSERT + COMMIT for {duration:g} s: {raw['sent']:,} "
            f"rows, {rate_raw:,.0f}/s")
    label = f"sqlite3, 1 txn/row, {senders} processes"
    return [
        Figure(name=f"sustained send→ack, {senders} senders x {agents} agents (msg/s)",
               ours=rate, unit="msg/s", baseline=rate_raw, baseline_label=label,
               target=(">=", 0.5), notes=[load, base, where]),
        Figure(name="sustained send→ack, absolute (msg/s)", ours=rate, unit="msg/s",
               target=(">=", 5000.0), target_on="ours",
               notes=["issue 15's absolute target; on a loaded 2-CPU machine the senders and "
                      "the daemon share the cores, so the ratio above is the fairer figure"]),
        Figure(name="sustained load: daemon CPU (% of one core)", ours=cpu, unit="%",
               target=("<=", 100.0), target_on="ours"),
        Figure(name="sustained load: send→ack p99 (ms)", ours=1000 * pct(lat, 0.99), unit="ms",
               baseline=1000 * pct(lat, 0.5), baseline_label="p50, same load",
               target=("<=", 50.0), target_on="ours", notes=[f"send→ack {ms_line(lat)}"]),
        Figure(name="WAL peak, sustained load (MB)", ours=peak, unit="MB", target=("<=", 64.0),
               target_on="ours",
               notes=[f"-wal sampled every 50 ms; while sending it was truncated {resets} times, "
                      f"longest gap {gap:.2f} s; it grew by ≥ {grown / 2**20:.0f} MB in all, ≥ "
                      f"{grown / max(sent['sent'], 1) / 1024:.1f} KiB per message sent"]),
    ]


# -- (5) one send as a cold process -------------------------------------------------------------
def bench_cli_send(tmp: Path, quick: bool) -> list[Figure]:
    rounds = 8 if quick else 30
    h = Harness(tmp, "cli", ["cli-0"])
    env = clean_env(str(tmp))
    base_argv = [sys.executable, "-c", "import sqlite3, json"]
    rng = random.Random(15)
    ours: list[float] = []
    base: list[float] = []
    try:
        for i in range(rounds + 1):  # the first round warms the page cache; dropped
            order = ["ours", "base"]
            rng.shuffle(order)
            for which in order:
                start = time.perf_counter()
                argv = (base_argv if which == "base" else
                        [str(agentmaild_script()), "send", "--db", str(h.db), "--to", "cli-0",
                         "--subject", f"t0={time.monotonic()!r}", "--body", BODY])
                done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
                took = time.perf_counter() - start
                if done.returncode != 0:
                    raise RuntimeError(f"{argv[1]} failed: {done.stderr.strip()[-500:]}")
                if i:
                    (ours if which == "ours" else base).append(took)
        if not h.wait_acks(rounds + 1, 30.0):
            raise RuntimeError("the daemon did not ack every CLI send")
    finally:
        h.stop()
    spawn_to_ack = h.latencies()[1:]
    ratios = sorted(o / b for o, b in zip(ours, base, strict=True))
    return [Figure(
        name="single send, CLI cold process (ms)", ours=1000 * median(ours), unit="ms",
        baseline=1000 * median(base), baseline_label="python -c 'import sqlite3, json'",
        ratio=statistics.median(ratios),
        notes=[f"N={rounds} shuffled rounds after a warm-up: `agentmaild send` (commit + wake "
               f"datagram to a running daemon, which acked every one) min "
               f"{1000 * min(ours):.1f} / median {1000 * median(ours):.1f} ms; baseline min "
               f"{1000 * min(base):.1f} / median {1000 * median(base):.1f} ms; ratio = median "
               "of per-round ratios. Informative: issue 15 asks only that it not get worse",
               f"spawn of `agentmaild send` → the daemon's ack COMMIT: {ms_line(spawn_to_ack)}"])]


def run(quick: bool) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="agentmaild-daemon-") as d:
        tmp = Path(d)
        figures = bench_latency(tmp, quick)
        figures += bench_sustained(tmp, quick)
        figures += bench_idle(tmp, quick)
        figures += bench_cli_send(tmp, quick)
    return figures


if __name__ == "__main__":
    for f in run(quick="--quick" in sys.argv):
        print(f.name, fmt(f.ours), fmt(f.baseline), f.verdict(), *f.notes, sep="\n  ")
