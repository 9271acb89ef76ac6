"""Two hosts on one PostgreSQL store, at the size issue 11 names: `serve --host host-a` and
`serve --host host-b` as separate processes (each with its own state directory, as on two
machines), 20 agents split between them, 4 sender processes writing 2,000 messages; host-a is
SIGKILLed 5 times during the run and restarted. The history checker of tests/reliability (on a
`store copy` of the database, tests/support/pg_history.py) proves: no loss, every message acked
exactly once by the delivery it was claimed under, repeats keep their delivery id and say so, no
daemon logged two acks for one delivery — and every turn ran on its agent's own host."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.reliability.history import read_ledgers
from tests.support.daemon import AGENTS, FAST, base_env
from tests.support.pg_history import check_pg_history, daemon_events, ledger_name
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(600)

HOSTS = {f"a{i:02d}": "host-a" for i in range(10)} | {f"b{i:02d}": "host-b" for i in range(10)}
SENDERS, PER_SENDER, KILLS = 4, 500, 5
# Turns are tiny, but 2 cores are shared with the other tests: no stall kills, no dead letters.
LOAD_ENV = {"AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S": "20",
            "AGENTMAILD_DAEMON_MAX_ATTEMPTS": "50"}
# A sender process: PER_SENDER messages to random agents in paced bursts (mail keeps arriving
# across the kills), on its own connection; the ids it sent, one per line, when done.
SENDER = """
import random, sys, time
from agentmaild.mail.mailer import Mailer
from agentmaild.store.postgres import PostgresMailStore
dsn, seed, total, out, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
    sys.argv[5:]
rng = random.Random(seed)
store = PostgresMailStore(dsn)
mailer = Mailer(store)
ids = []
while len(ids) < total:
    for _ in range(min(25, total - len(ids))):
        sent = mailer.send(sender="lead", to=rng.choice(names), subject=f"load {seed}-{len(ids)}",
                           body="x" * rng.randrange(300))
        ids += sent.ids
    time.sleep(0.1)
store.close()
with open(out, "w") as f:
    f.write("\\n".join(ids) + "\\n")
"""


def ok(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "agentmaild", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def daemon(env: dict[str, str], host: str, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    env = {**env, **LOAD_ENV, "XDG_STATE_HOME": str(log.parent / f"state-{host}"),
           "AM_TEST_HOST": host}
    return subprocess.Popen([sys.executable, "-m", "agentmaild", "serve", "--host", host],
                            env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)


def beats(env: dict[str, str]) -> dict[str, str]:
    return {h["host"]: h["state"] for h in ok(env, "status").get("hosts") or ()}


def turns(ledgers: Path, host: str) -> int:
    return sum(p.read_text().count("\n") for p in ledgers.glob(f"{host}--*.jsonl"))


def unread(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM messages WHERE read = 0 AND to_agent <> 'lead'"
                           " AND from_agent = 'lead'").fetchone()
    return int(row[0]) if row else -1


def test_two_host_daemons_lose_nothing_across_kills(tmp_path: Path, pg_dsn: str) -> None:
    env = base_env(tmp_path, {"AGENTMAIL_DB": pg_dsn,
                              "XDG_STATE_HOME": str(tmp_path / "cli")}, FAST)
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    ok(env, "agents", "add", "lead", "--capability", "lead")
    for name, host in HOSTS.items():
        # The ledger's name carries the host of the daemon that ran the turn.
        ledger = ledgers / ledger_name('"$AM_TEST_HOST"', name)
        command = f"sh -c 'exec {sys.executable} -S {AGENTS / 'ledger_agent.py'} {ledger}'"
        added = ok(env, "agents", "add", name, "--capability", "builder", "--channel", "spawn",
                   "--host", host, "--command", command)
        assert added["agent"]["host"] == host
    # One log per daemon process: a SIGKILL can tear its last line, which must not swallow the
    # next process's first one.
    a_logs = [tmp_path / f"host-a-{i}.log" for i in range(KILLS + 1)]
    logs = [*a_logs, tmp_path / "host-b.log"]
    daemons = {"host-a": daemon(env, "host-a", a_logs[0]),
               "host-b": daemon(env, "host-b", logs[-1])}
    started = time.monotonic()
    try:
        wait_for(lambda: beats(env) == {"host-a": "up", "host-b": "up"}, 60, "two heartbeats")
        out = [tmp_path / f"sent-{s}.txt" for s in range(SENDERS)]
        senders = [subprocess.Popen([sys.executable, "-c", SENDER, pg_dsn, str(s),
                                     str(PER_SENDER), str(out[s]), *HOSTS], env=env)
                   for s in range(SENDERS)]
        for kill in range(KILLS):  # host-a dies mid-run, with turns in flight, and comes back
            # Its recovery first: turns that the killed daemon's children finish meanwhile are not
            # this daemon's deliveries.
            wait_for(lambda k=kill: daemon_events([a_logs[k]], "daemon.recovered"), 120,
                     f"host-a's daemon {kill} to recover")
            seen = turns(ledgers, "host-a")
            wait_for(lambda s=seen: turns(ledgers, "host-a") >= s + 5, 120,
                     f"host-a to deliver before kill {kill + 1}")
            daemons["host-a"].send_signal(signal.SIGKILL)
            daemons["host-a"].wait(30)
            daemons["host-a"] = daemon(env, "host-a", a_logs[kill + 1])
        for s in senders:
            assert s.wait(300) == 0
        sent = [i for path in out for i in path.read_text().split()]
        assert len(sent) == SENDERS * PER_SENDER
        wait_for(lambda: unread(pg_dsn) == 0, 300, "every message acked")
        assert beats(env) == {"host-a": "up", "host-b": "up"}
        assert daemons["host-b"].poll() is None  # host-a's kills and recoveries never touched it
    finally:
        for proc in daemons.values():
            proc.send_signal(signal.SIGTERM)
        for proc in daemons.values():
            proc.wait(30)
    ledger = read_ledgers(sorted(ledgers.glob("*.jsonl")))
    history = check_pg_history(pg_dsn, tmp_path, ledger, sent, hosts=HOSTS,
                               acked_events=daemon_events(logs, "delivery.acked"))
    recovered = daemon_events(a_logs, "daemon.recovered")
    requeued = sum(e["requeued"] for e in recovered)
    print(f"{KILLS} SIGKILLs of host-a, {requeued} batches "
          f"re-queued, {time.monotonic() - started:.1f}s; {history.summary()}")
    history.assert_ok("(two hosts on PostgreSQL)")
    assert {r["ledger"].partition("--")[0] for r in ledger} == {"host-a", "host-b"}
    assert len(recovered) == KILLS + 1  # the first start and each restart recovered host-a
    assert requeued >= 1, "no kill ever caught a delivery in flight"
