"""A full disk: the sender gets a clear error, nothing is corrupted, service resumes with space.

Preferred: a real 1 MiB tmpfs mounted for the test (needs root and mount rights), grown with
``mount -o remount`` afterwards, with a daemon delivering throughout. Where mounting is not
permitted, the same checks run in-process against a size cap (``PRAGMA max_page_count``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmaild.errors import StoreError
from agentmaild.mail import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import (
    DaemonProc,
    add_spawn,
    agent_cmd,
    integrity,
    read_jsonl,
    wait_for,
)
from tests.reliability.history import connect_ro, orphan_problems

BIG = "z" * 60_000  # under the 64 KiB body limit: it is the disk that says no


def _mount(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small"
    try:
        mounted = _mount(where, "1m")
    except OSError:
        mounted = False
    assert mounted, "mounting a 1 MiB tmpfs needs root (CI runs as root)"
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def _grow(where: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)


def _fill(mailer: Mailer, bodies: tuple[str, ...] = (BIG,)) -> tuple[list[str], StoreError]:
    """Send mail to a pull agent until the store refuses each body size; the ids that made it."""
    ids: list[str] = []
    error: StoreError | None = None
    for body in bodies:
        for i in range(5000):
            try:
                ids += mailer.send(sender="bob", to="sink", subject=f"fill {i}", body=body).ids
            except StoreError as exc:
                error = exc
                break
    assert error is not None, "the store never filled up"
    return ids, error


def _fill_last_frames(store: SqliteMailStore) -> None:
    """One-page commits until not even one more WAL frame fits."""
    for i in range(1000):
        try:
            store.update_agent("sink", {"parent": f"filler-{i}"})
        except StoreError:
            return
    raise AssertionError("the WAL never filled up")


def _intact(db: Path, ids: list[str]) -> None:
    assert integrity(db) == "ok"
    conn = connect_ro(db)
    try:
        assert orphan_problems(conn) == []
        bodies = dict(conn.execute("SELECT id, body FROM messages WHERE to_agent = 'sink'"))
    finally:
        conn.close()
    assert set(bodies) == set(ids) and all(b.strip("z") == "" for b in bodies.values())


def _setup(db: Path, ledger: Path) -> SqliteMailStore:
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    store.add_agent(Agent(name="sink", capability="builder"))
    add_spawn(store, "worker", agent_cmd("ledger_agent.py", str(ledger)))
    return store


def test_full_disk_clear_error_no_corruption_service_resumes(
    small_fs: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    db, ledger = small_fs / "mail.db", tmp_path / "worker.jsonl"
    store = _setup(db, ledger)
    d = daemons(path=db)
    try:
        mailer = Mailer(store)
        first = mailer.send(sender="bob", to="worker", subject="before", body="x").ids[0]
        wait_for(lambda: store.get_message(first).read, 15, "delivery before the disk fills")  # type: ignore[union-attr]
        ids, error = _fill(mailer)
        assert "disk is full" in error.message, error.message
        cli = d.cli("send", "--from", "bob", "--to", "worker", "--subject", "s", "--body", BIG)
        assert cli.returncode == 1, cli
        lines = cli.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "disk is full" in lines[0]
        as_json = d.cli("send", "--from", "bob", "--to", "worker", "--subject", "s",
                        "--body", BIG, "--json")
        assert as_json.returncode == 1
        assert json.loads(as_json.stdout)["error"]["code"] == "store"
        assert d.ready()  # the daemon rode it out
        _intact(db, ids)
        _grow(small_fs, "16m")
        again = d.cli("send", "--from", "bob", "--to", "worker", "--subject", "after",
                      "--body", "space is back", "--json")
        assert again.returncode == 0, again.stderr
        [after] = json.loads(again.stdout)["ids"]
        wait_for(lambda: store.get_message(after).read, 15, "delivery once space is back")  # type: ignore[union-attr]
        assert {m for r in read_jsonl(ledger) for m in r["message_ids"]} == {first, after}
        assert d.stop() == 0
    finally:
        store.close()
        if d.alive():
            d.kill()
    _intact(db, ids)
    print(f"full disk: {len(ids)} x 60 KB messages filled 1 MiB; refused with {error.message!r}")


def test_ack_failing_on_a_full_disk_is_redelivered_once_space_returns(
    small_fs: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    db, rec, gate = small_fs / "mail.db", tmp_path / "gated.jsonl", tmp_path / "gate"
    store = _setup(db, tmp_path / "worker.jsonl")
    add_spawn(store, "gated", agent_cmd("gated_agent.py", str(rec), str(gate)))
    d = daemons({"AGENTMAILD_DAEMON_LEASE_S": "3"}, path=db)
    try:
        mid = Mailer(store).send(sender="bob", to="gated", subject="s", body="x").ids[0]
        wait_for(lambda: read_jsonl(rec), 15, "the gated turn to start")
        _fill(Mailer(store), (BIG, "z" * 2000, "z"))
        _fill_last_frames(store)
        gate.touch()  # the turn succeeds, and the ack cannot be written
        wait_for(lambda: len(read_jsonl(rec)) >= 2, 15, "the turn to end")
        # The ack meets the full disk: retried while the lease holds, then the loop gives up.
        wait_for(lambda: [e for e in d.events("delivery.ack_retrying")
                          + d.events("supervisor.loop_crashed")
                          if "disk is full" in e["error"]], 5, "the ack to fail")
        assert not store.get_message(mid).read  # type: ignore[union-attr]
        _grow(small_fs, "16m")
        wait_for(lambda: store.get_message(mid).read, 6, "the batch to be acked after all")  # type: ignore[union-attr]
    finally:
        store.close()
        if d.alive():
            d.kill()


def test_size_capped_store_in_process(tmp_path: Path) -> None:
    """The portable variant: a connection-level size cap, raised again afterwards."""
    db = tmp_path / "capped.db"
    store = _setup(db, tmp_path / "unused.jsonl")
    conn = store.connection
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 200}")
    try:
        mailer = Mailer(store)
        ids, error = _fill(mailer)
        assert "full" in error.message, error.message
        assert ids, "nothing fitted before the cap"
        _intact(db, ids)
        conn.execute("PRAGMA max_page_count = 1073741823")
        ids += mailer.send(sender="bob", to="sink", subject="after", body=BIG).ids
        _intact(db, ids)
    finally:
        store.close()
