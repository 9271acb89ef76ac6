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
from typing import Any

import pytest

from agentmaild.errors import StoreError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import (
    DaemonProc,
    add_spawn,
    agent_cmd,
    assert_sound,
    read_jsonl,
    wait_for,
)
from tests.reliability.history import connect_ro

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
    assert_sound(db)
    conn = connect_ro(db)
    try:
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


def _gated_turn_then_full_disk(
    small_fs: Path, tmp_path: Path, daemons: Callable[..., DaemonProc], lease_s: str,
    *extra: str,
) -> tuple[SqliteMailStore, DaemonProc, str, str]:
    """A gated turn starts, the disk fills to the last WAL frame, then the turn is let finish:
    the store, the daemon, the message id and the turn's delivery id."""
    db, rec, gate = small_fs / "mail.db", tmp_path / "gated.jsonl", tmp_path / "gate"
    store = _setup(db, tmp_path / "worker.jsonl")
    add_spawn(store, "gated", agent_cmd("gated_agent.py", str(rec), str(gate), *extra))
    d = daemons({"AGENTMAILD_DAEMON_LEASE_S": lease_s}, path=db)
    mid = Mailer(store).send(sender="bob", to="gated", subject="s", body="x").ids[0]
    [started] = wait_for(lambda: read_jsonl(rec), 30, "the gated turn to start")
    _fill(Mailer(store), (BIG, "z" * 2000, "z"))
    _fill_last_frames(store)
    gate.touch()  # the turn ends, and whatever the daemon writes next meets the full disk
    wait_for(lambda: len(read_jsonl(rec)) >= 2, 30, "the turn to end")
    return store, d, mid, started["uuid"]


def _failed(d: DaemonProc, event: str, delivery_id: str | None = None) -> list[dict[str, Any]]:
    return [e for e in d.events(event) if "disk is full" in e["error"]
            and delivery_id in (None, e.get("delivery_id"))]


def _turns(rec: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(rec) if r["phase"] == "started"]


def _acked_by(db: Path, mid: str) -> str | None:
    conn = connect_ro(db)
    try:
        row = conn.execute("SELECT read, acked_by FROM messages WHERE id = ?", (mid,)).fetchone()
    finally:
        conn.close()
    return str(row["acked_by"]) if row["read"] == 1 else None


def test_ack_failing_within_the_lease_is_retried_until_space_returns(
    small_fs: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    """The ack meets the full disk, is retried (the lease is long), lands once space is back:
    one turn, acked under its own delivery id, the loop never crashed."""
    db = small_fs / "mail.db"
    store, d, mid, dlv = _gated_turn_then_full_disk(small_fs, tmp_path, daemons, "60")
    try:
        wait_for(lambda: _failed(d, "delivery.ack_retrying", dlv), 30, "the ack to be retried")
        assert not store.get_message(mid).read  # type: ignore[union-attr]
        _grow(small_fs, "16m")
        wait_for(lambda: _acked_by(db, mid), 30, "the retried ack to land")
        assert _acked_by(db, mid) == dlv
        assert d.stop() == 0
    finally:
        store.close()
        if d.alive():
            d.kill()
    assert d.events("supervisor.loop_crashed") == []
    assert [e["delivery_id"] for e in d.events("delivery.acked")] == [dlv]
    assert [t["uuid"] for t in _turns(tmp_path / "gated.jsonl")] == [dlv]  # exactly one turn
    assert_sound(db)


def _space_back_then_reaped_and_acked(small_fs: Path, d: DaemonProc, dlv: str, mid: str) -> None:
    """Grow the disk; the running daemon's reaper must name ``dlv`` and its redelivery be acked."""
    _grow(small_fs, "16m")
    wait_for(lambda: [e for e in d.events("supervisor.reaped_expired")
                      if dlv in e["deliveries"]], 30, "the reaper to name the delivery")
    wait_for(lambda: _acked_by(small_fs / "mail.db", mid), 30, "the redelivery to be acked")
    assert d.stop() == 0


def test_ack_failing_past_the_lease_is_reaped_and_redelivered_under_its_id(
    small_fs: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    """Still full when the lease ends: the ack gives up, the running daemon's reaper re-queues
    the batch once space is back, and the second turn carries the same delivery id."""
    db, rec = small_fs / "mail.db", tmp_path / "gated.jsonl"
    store, d, mid, dlv = _gated_turn_then_full_disk(small_fs, tmp_path, daemons, "3")
    try:
        wait_for(lambda: _failed(d, "supervisor.loop_crashed"), 30, "the ack to give up")
        assert not store.get_message(mid).read  # type: ignore[union-attr]
        _space_back_then_reaped_and_acked(small_fs, d, dlv, mid)
    finally:
        store.close()
        if d.alive():
            d.kill()
    first, second = _turns(rec)
    assert first["uuid"] == second["uuid"] == dlv
    assert "REDELIVERY" not in first["text"] and "REDELIVERY (attempt 2)" in second["text"]
    assert _acked_by(db, mid) == dlv
    assert_sound(db)


def test_release_failing_on_a_full_disk_is_reaped_and_redelivered_under_its_id(
    small_fs: Path, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    """The turn fails while the disk is full: the release cannot be written, is given up at the
    lease's end (logged), and the reaper re-queues the batch; the retry succeeds under its id."""
    db, rec, ok = small_fs / "mail.db", tmp_path / "gated.jsonl", tmp_path / "ok"
    store, d, mid, dlv = _gated_turn_then_full_disk(
        small_fs, tmp_path, daemons, "3", "--exit", "1", "--exit-unless", str(ok)
    )
    try:
        wait_for(lambda: _failed(d, "delivery.release_failed", dlv), 30, "the release to give up")
        assert not store.get_message(mid).read  # type: ignore[union-attr]
        ok.touch()  # the next turn succeeds
        _space_back_then_reaped_and_acked(small_fs, d, dlv, mid)
    finally:
        store.close()
        if d.alive():
            d.kill()
    first, second = _turns(rec)
    assert first["uuid"] == second["uuid"] == dlv
    assert "REDELIVERY (attempt 2)" in second["text"]
    assert _acked_by(db, mid) == dlv
    assert _unsettled(db) == []
    assert_sound(db)


def _unsettled(db: Path) -> list[str]:
    conn = connect_ro(db)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM am_deliveries WHERE state != 'acked'")]
    finally:
        conn.close()


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
