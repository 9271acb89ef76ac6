"""Delivery history and agent logs end to end: a real daemon, stand-in spawn agents, the real CLI.

`deliveries` lists what the daemon recorded per attempt, `read` shows who acked a message,
`purge` and the daemon keep the history bounded, `logs` prints and follows an agent's own log.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild.control.client import poke
from agentmaild.ids import iso_now
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Attempt
from agentmaild.procs.logfiles import log_path
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc, agent_cmd, base_env, daemon_factory
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

FAST = {
    "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.2",
    "AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "0.05",
    "AGENTMAILD_DAEMON_BACKOFF_MAX_S": "0.2",
    "AGENTMAILD_DAEMON_BACKOFF_JITTER": "0",
    "AGENTMAILD_DAEMON_MAX_ATTEMPTS": "3",
}
DAY_S = 86400.0


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    with daemon_factory(db, tmp_path, defaults=FAST, text=True) as make:
        yield make


def add_spawn(store: SqliteMailStore, name: str, *command: str) -> None:
    store.add_agent(Agent(name=name, capability="builder", channel="spawn", command=command))


def ok_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def attempts(d: DaemonProc, *args: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = ok_json(d.cli("deliveries", "--json", *args))["attempts"]
    return rows


def usage_error(result: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and needle in line


# -- delivery history ---------------------------------------------------------------------------


def test_a_delivery_shows_one_acked_attempt_and_read_names_it(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    add_spawn(store, "ok", *agent_cmd("record_agent.py", str(tmp_path / "ok.jsonl")))
    d = daemons()
    mid = Mailer(store).send(sender="bob", to="ok", subject="hi", body="x").ids[0]
    poke(d.sock, ["ok"])
    wait_for(lambda: store.get_message(mid).read, 15, "the delivery")  # type: ignore[union-attr]
    [row] = wait_for(lambda: attempts(d, "--agent", "ok"), 20, "the history row")
    assert (row["agent"], row["message_ids"], row["attempt"]) == ("ok", [mid], 1)
    assert (row["outcome"], row["error"]) == ("acked", None)
    assert row["delivery_id"].startswith("dlv-") and row["duration_s"] > 0
    assert row["at"].endswith("Z")
    message = ok_json(d.cli("read", mid, "--json"))["message"]
    assert message["acked_by"] == message["delivery_id"] == row["delivery_id"]
    assert message["acked_at"].endswith("Z") and message["read"] is True
    plain = d.cli("read", mid)
    assert f"acked:    {message['acked_at']} by {row['delivery_id']}" in plain.stdout
    assert f"delivery: {row['delivery_id']}" in plain.stdout
    human = d.cli("deliveries", "--agent", "ok")
    assert human.returncode == 0, human.stderr
    [line] = human.stdout.splitlines()
    assert row["delivery_id"] in line and " acked " in line and mid in line and "#1" in line
    log = d.cli("logs", "ok")
    assert f"turn delivery={row['delivery_id']}" in log.stdout and "--- exit 0" in log.stdout


def test_a_failing_agent_shows_failed_attempts_then_dead(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    add_spawn(store, "doomed", *agent_cmd("flaky_agent.py", str(tmp_path / "count"), "99"))
    d = daemons()
    mid = Mailer(store).send(sender="bob", to="doomed", subject="lost?", body="x").ids[0]
    poke(d.sock, ["doomed"])
    wait_for(lambda: store.dead_letters("doomed"), 15, "a dead letter")
    rows = wait_for(lambda: (r := attempts(d, "--agent", "doomed")) and len(r) == 3 and r, 5)
    assert [(r["attempt"], r["outcome"]) for r in rows] == [
        (3, "dead"),
        (2, "failed"),
        (1, "failed"),
    ]
    assert {r["delivery_id"] for r in rows} == {store.dead_letters("doomed")[0].delivery_id}
    assert all(r["message_ids"] == [mid] and r["error"] for r in rows)
    message = ok_json(d.cli("read", mid, "--json"))["message"]
    assert (message["read"], message["acked_by"], message["acked_at"]) == (False, None, None)
    assert message["delivery_id"] == rows[0]["delivery_id"]
    log = d.cli("logs", "doomed", "-n", "100").stdout
    assert log.count("flaky_agent: failing run") == 3


def test_deliveries_filters_by_agent_message_since_and_limit(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    add_spawn(store, "ok", *agent_cmd("record_agent.py", str(tmp_path / "ok.jsonl")))
    add_spawn(store, "flaky", *agent_cmd("flaky_agent.py", str(tmp_path / "count"), "1"))
    d = daemons()
    mailer = Mailer(store)
    first = mailer.send(sender="bob", to="ok", subject="one", body="x").ids[0]
    poke(d.sock, ["ok"])
    wait_for(lambda: store.get_message(first).read, 15, "the first delivery")  # type: ignore[union-attr]
    later = mailer.send(sender="bob", to="flaky", subject="two", body="y").ids[0]
    poke(d.sock, ["flaky"])
    wait_for(lambda: store.get_message(later).read, 15, "the retried delivery")  # type: ignore[union-attr]
    every = wait_for(lambda: (r := attempts(d)) and len(r) == 3 and r, 20, "three rows")
    assert [(r["agent"], r["outcome"]) for r in every] == [
        ("flaky", "acked"),
        ("flaky", "failed"),
        ("ok", "acked"),
    ]
    assert [r["at"] for r in every] == sorted((r["at"] for r in every), reverse=True)
    assert [r["agent"] for r in attempts(d, "--agent", "ok")] == ["ok"]
    assert [r["message_ids"] for r in attempts(d, "--message", later)] == [[later], [later]]
    assert attempts(d, "--message", first) == [every[2]]
    assert attempts(d, "--since", every[1]["at"]) == every[:2]  # ISO-8601, as printed
    assert attempts(d, "--since", "1h") == every
    assert attempts(d, "--since", iso_now(time.time() + 60)) == []
    assert attempts(d, "--agent", "flaky", "--limit", "1") == every[:1]
    usage_error(d.cli("deliveries", "--agent", "nobody"), 1, "no agent named 'nobody'")
    usage_error(d.cli("deliveries", "--message", "msg-nosuchmessage"), 1, "no message")
    usage_error(d.cli("deliveries", "--since", "yesterday"), 2, "--since")
    usage_error(d.cli("deliveries", "--since", "10 parsecs"), 2, "--since")
    bad = d.cli("deliveries", "--since", "5x", "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["code"] == "usage"


def test_read_only_commands_never_create_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "mail.db"
    d = DaemonProc(missing, tmp_path, text=True)
    usage_error(d.cli("deliveries"), 1, "no store at")
    usage_error(d.cli("logs", "bob"), 1, "no store at")
    gone = d.cli("deliveries", "--json")
    assert gone.returncode == 1 and json.loads(gone.stdout)["error"]["code"] == "store"
    assert not missing.parent.exists()


# -- retention ----------------------------------------------------------------------------------


def seed_history(store: SqliteMailStore, *ages: tuple[str, float]) -> None:
    now = time.time()
    for n, (agent, age_s) in enumerate(ages):
        store.record_attempt(
            Attempt(
                delivery_id=f"dlv-seeded{n:04d}",
                agent=agent,
                message_ids=(f"msg-seeded{n:04d}",),
                attempt=1,
                outcome="acked",
                at=now - age_s,
            )
        )


def test_purge_removes_expired_and_selected_history_and_says_how_many(
    store: SqliteMailStore, tmp_path: Path
) -> None:
    seed_history(store, ("bob", 40 * DAY_S), ("bob", 2 * DAY_S), ("carol", 3600), ("dan", 60))
    d = DaemonProc(store.path, tmp_path, text=True)
    # The 40-day row is past the default 30 days; --days 1 selects the 2-day row too.
    assert ok_json(d.cli("purge", "--days", "1", "--json")) == {
        "ok": True,
        "deleted": 0,
        "attempts_deleted": 2,
    }
    human = d.cli("purge", "--agent", "carol")
    assert human.stdout.strip() == "deleted 0 message(s), 1 delivery attempt record(s)"
    d.env["AGENTMAILD_STORE_ATTEMPTS_KEEP_DAYS"] = "0.0001"  # ~9 s: the 60 s old row expires
    assert ok_json(d.cli("purge", "--agent", "zed", "--json"))["attempts_deleted"] == 1
    assert store.list_attempts() == []


def test_the_daemon_prunes_expired_history_at_start(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc]
) -> None:
    seed_history(store, ("bob", 2 * DAY_S), ("bob", 3600))
    d = daemons({"AGENTMAILD_STORE_ATTEMPTS_KEEP_DAYS": "1"})
    wait_for(lambda: len(store.list_attempts()) == 1, 20, "the expired row to go")
    [kept] = store.list_attempts()
    assert kept.delivery_id == "dlv-seeded0001"
    [event] = wait_for(lambda: d.events("daemon.history_pruned"), 20, "the prune log line")
    assert (event["deleted"], event["keep_days"]) == (1, 1.0)


# -- agent logs ---------------------------------------------------------------------------------


def test_logs_tail_and_errors(store: SqliteMailStore, tmp_path: Path) -> None:
    add_spawn(store, "sp", "true")
    d = DaemonProc(store.path, tmp_path, text=True)
    log = log_path(store.path, "sp")
    quiet = d.cli("logs", "sp")
    assert quiet.returncode == 0 and quiet.stdout == ""
    assert (
        quiet.stderr.strip()
        == f"no log yet for sp: it starts at {log} with the agent's first delivery"
    )
    pull = d.cli("logs", "bob")
    assert pull.returncode == 0 and "only spawn and stdin agents" in pull.stderr
    usage_error(d.cli("logs", "nobody"), 1, "no agent named 'nobody'")
    usage_error(d.cli("logs", "../etc"), 1, "")
    log.parent.mkdir(parents=True)
    log.with_name("sp.log.1").write_text("".join(f"old {n}\n" for n in range(10)))
    log.write_text("".join(f"new {n}\n" for n in range(3)))
    assert d.cli("logs", "sp", "-n", "2").stdout == "new 1\nnew 2\n"
    # Short of lines, the newest rotated file supplies the older ones.
    assert d.cli("logs", "sp", "-n", "5").stdout == "old 8\nold 9\nnew 0\nnew 1\nnew 2\n"
    assert d.cli("logs", "sp", "-n", "0").stdout == ""


def test_logs_follow_across_rotation_until_ctrl_c(store: SqliteMailStore, tmp_path: Path) -> None:
    add_spawn(store, "sp", "true")
    log = log_path(store.path, "sp")
    log.parent.mkdir(parents=True)
    log.write_text("one\ntwo\n")
    out, err = tmp_path / "follow.out", tmp_path / "follow.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentmaild",
                "logs",
                "sp",
                "-f",
                "-n",
                "1",
                "--db",
                str(store.path),
            ],
            env=base_env(tmp_path),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        wait_for(lambda: out.read_bytes() == b"two\n", 15, "the last line")
        with log.open("a") as f:
            f.write("three\n")
        wait_for(lambda: out.read_bytes().endswith(b"three\n"), 20, "an appended line")
        with log.open("a") as f:
            f.write("four, last before the rotation\n")
        log.rename(log.with_name("sp.log.1"))  # as RotatingLog rotates
        log.write_text("five, in the new file\n")
        wait_for(lambda: out.read_bytes().endswith(b"five, in the new file\n"), 20, "rotation")
        assert (
            out.read_text() == "two\nthree\nfour, last before the rotation\nfive, in the new file\n"
        )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert err.read_text() == ""
