"""SIGKILL at random moments — the daemon under load, senders mid-broadcast — and nothing is lost.

The kill moments come from a seeded RNG; the seed is printed and named in every failure
(rerun with AGENTMAILD_RELIABILITY_SEED=<seed>). Completion waits are event-based.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.models import PRIORITY_RANK, Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import (
    AGENTS,
    DaemonProc,
    add_spawn,
    agent_cmd,
    wait_for,
)
from tests.reliability.history import (
    broadcast_problems,
    check_history,
    connect_ro,
    integrity_problems,
    orphan_problems,
    read_ledgers,
)

N_AGENTS = 20
N_MESSAGES = 2000
MIN_KILLS = 10
# Turns are tiny, but 2 cores are shared with the other tests: no stall kills, no dead letters.
LOAD_ENV = {
    "AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S": "20",
    "AGENTMAILD_DAEMON_MAX_ATTEMPTS": "50",
}


def seed_for(test: str) -> int:
    seed = int(os.environ.get("AGENTMAILD_RELIABILITY_SEED") or random.randrange(2**32))
    print(f"{test}: seed {seed} (rerun with AGENTMAILD_RELIABILITY_SEED={seed})")
    return seed


class Sender(threading.Thread):
    """Sends ``total`` messages to random agents in paced bursts, on its own connection."""

    def __init__(self, db: Path, names: list[str], total: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.db, self.names, self.total = db, names, total
        self.rng = random.Random(seed)
        self.ids: list[str] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        store = SqliteMailStore(self.db)
        try:
            mailer = Mailer(store)
            while len(self.ids) < self.total and not self.stop.is_set():
                for _ in range(min(50, self.total - len(self.ids))):
                    sent = mailer.send(
                        sender="bob", to=self.rng.choice(self.names),
                        subject=f"load {len(self.ids)}", body="x" * self.rng.randrange(400),
                        priority=self.rng.choice(list(PRIORITY_RANK)),
                    )
                    self.ids += sent.ids
                self.stop.wait(0.15)  # load shaping: mail keeps arriving across the kills
        except BaseException as exc:  # surfaced by the test, with the seed
            self.error = exc
        finally:
            store.close()


def in_flight(db: Path) -> int:
    conn = connect_ro(db)
    try:
        return int(conn.execute(
            "SELECT count(*) FROM am_deliveries WHERE state = 'claimed'"
        ).fetchone()[0])
    finally:
        conn.close()


def test_random_sigkills_of_the_daemon_lose_nothing(
    db: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    seed = seed_for("daemon-kill")
    rng = random.Random(seed)
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    names = [f"agent-{i:02d}" for i in range(N_AGENTS)]
    ledgers = [tmp_path / f"{n}.jsonl" for n in names]
    for name, ledger in zip(names, ledgers, strict=True):
        add_spawn(store, name, agent_cmd("ledger_agent.py", str(ledger)))
    store.close()
    sender = Sender(db, names, N_MESSAGES, seed)
    sender.start()
    kills, interrupted = 0, 0
    started = time.monotonic()
    try:
        while kills < MIN_KILLS or sender.is_alive():
            d = daemons(LOAD_ENV)
            # Sometimes right after recovery, mostly mid-flow.
            time.sleep(0 if rng.random() < 0.15 else rng.uniform(0.05, 1.0))
            d.kill()
            kills += 1
            interrupted += in_flight(db) > 0
        assert sender.error is None, f"seed {seed}: sender failed: {sender.error!r}"
        final = daemons(LOAD_ENV)
        check = SqliteMailStore(db)
        try:
            wait_for(lambda: _unread(check, names) == 0, 120,
                     f"all {N_MESSAGES} messages acked (seed {seed})")
        finally:
            check.close()
        assert final.stop() == 0
    finally:
        sender.stop.set()
        sender.join(30)
    history = check_history(
        db, read_ledgers(ledgers), sender.ids, acked_events=final.events("delivery.acked")
    )
    requeued = sum(e["requeued"] for e in final.events("daemon.recovered"))
    print(f"seed {seed}: {kills} SIGKILLs ({interrupted} with deliveries in flight, {requeued} "
          f"batches re-queued) in {time.monotonic() - started:.1f}s; {history.summary()}")
    history.assert_ok(f"(seed {seed})")
    assert len(sender.ids) == N_MESSAGES and kills >= MIN_KILLS
    assert requeued >= 1, f"seed {seed}: no kill ever caught a delivery in flight"
    # A re-queued batch is claimed again, so it is acked on attempt 2 or later, and the turn that
    # acked it was told so (the checker also holds the marker to the store's claim count).
    assert history.redelivery_turns >= 1, f"seed {seed}: no agent was shown a REDELIVERY marker"


def _unread(store: SqliteMailStore, names: list[str]) -> int:
    return sum(c.unread for a, c in store.counts().items() if a in names)


# -- senders killed mid-broadcast -------------------------------------------------------------


def _committed(out: bytes, recipients: int) -> set[str]:
    ids = set()
    for line in out.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith("bc-") and parts[1] == str(recipients):
            ids.add(parts[0])
    return ids


def _kill_sender_after(db: Path, rng: random.Random, env: dict[str, str]) -> bytes:
    """Start a broadcasting sender, SIGKILL it after a random number of commits plus jitter."""
    proc = subprocess.Popen(
        [sys.executable, str(AGENTS / "broadcast_agent.py"), str(db), "bob"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    assert proc.stdout is not None
    want, lines = rng.randint(1, 25), []
    deadline = time.monotonic() + 30
    while len(lines) < want and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    time.sleep(rng.uniform(0, 0.02))  # lands anywhere inside the next broadcast
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")[-2000:]
    return b"".join(lines) + rest


def _kill_cli_senders(db: Path, rng: random.Random, env: dict[str, str], n: int) -> None:
    """The real CLI, `send --to @all`, SIGKILLed at random moments of its short life."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "agentmaild", "send", "--db", str(db), "--from", "bob",
             "--to", "@all", "--subject", f"cli {i}", "--body", "y" * 1000],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )
        for i in range(n)
    ]
    for proc in procs:
        time.sleep(rng.uniform(0, 0.15))
        proc.send_signal(signal.SIGKILL)
    for proc in procs:
        proc.wait(10)


def test_senders_killed_mid_broadcast_leave_no_half_broadcast(db: Path, tmp_path: Path) -> None:
    seed = seed_for("sender-kill")
    rng = random.Random(seed)
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    for i in range(N_AGENTS):
        store.add_agent(Agent(name=f"member-{i:02d}", capability="builder"))
    store.close()
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTMAIL_DB", "AGENTMAIL_AGENT")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    committed: set[str] = set()
    for _ in range(8):
        committed |= _committed(_kill_sender_after(db, rng, env), N_AGENTS)
    _kill_cli_senders(db, rng, env, 6)
    conn = connect_ro(db)
    try:
        problems = integrity_problems(conn) + orphan_problems(conn)
        problems += broadcast_problems(conn, N_AGENTS, committed)
        broadcasts = conn.execute(
            "SELECT count(DISTINCT broadcast_id) FROM messages WHERE broadcast_id IS NOT NULL"
        ).fetchone()[0]
    finally:
        conn.close()
    print(f"seed {seed}: 14 senders SIGKILLed; {broadcasts} whole broadcasts, "
          f"{len(committed)} seen committed")
    assert not problems, f"seed {seed}: {problems}"
    assert len(committed) >= 8
