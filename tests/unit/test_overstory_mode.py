"""Overstory mode (issue 16): one registry view, banners both ways, deletions, the read race.

Overstory's side is ``tests.support.overstory`` (rows and files exactly as the issue describes);
ours is the real store, mail rules, hot path and delivery loop on the same ``.overstory/`` files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild.errors import RecipientRefused, ValidationError
from agentmaild.hot import check as fast
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.overstory import OverstoryProject, marker_text

ISO_Z = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.fixture
def ov(tmp_path: Path) -> OverstoryProject:
    """An Overstory project: a lead and two builders of its own, one finished scout."""
    project = OverstoryProject(tmp_path / "proj")
    project.session("lead-1", "lead")
    project.session("ov-builder-9", "builder", parent="lead-1")
    project.session("ov-builder-8", "builder", state="in_turn", parent="lead-1")
    project.session("ov-scout-1", "scout", state="completed")
    return project


@pytest.fixture
def store(ov: OverstoryProject) -> Iterator[SqliteMailStore]:
    """Our store on Overstory's mail.db, with agents of our own: a builder and a reviewer."""
    s = SqliteMailStore(ov.mail_db)
    s.add_agent(Agent(name="am-builder-1", capability="builder"))
    s.add_agent(Agent(name="am-reviewer-1", capability="reviewer"))
    yield s
    s.close()


@pytest.fixture
def mailer(store: SqliteMailStore) -> Mailer:
    return Mailer(store)


def test_the_mode_is_on_for_overstorys_store_and_off_elsewhere(
    store: SqliteMailStore, tmp_path: Path
) -> None:
    assert store.overstory is not None
    plain = SqliteMailStore(tmp_path / "plain" / "mail.db")
    assert plain.overstory is None
    plain.close()
    flavoured = SqliteMailStore(tmp_path / "plain" / "mail.db", flavor="overstory")
    assert flavoured.overstory is not None
    flavoured.close()


# -- item 1: two registries ---------------------------------------------------------------------
def test_an_agent_only_overstory_knows_is_a_valid_recipient(mailer: Mailer) -> None:
    sent = mailer.send(sender="am-builder-1", to="ov-builder-9", subject="s", body="b")
    assert [m.to_agent for m in sent.messages] == ["ov-builder-9"]
    with pytest.raises(RecipientRefused, match="unknown recipient"):
        mailer.send(sender="am-builder-1", to="nobody-knows-me", subject="s", body="b")


def test_a_group_reaches_the_members_of_both_registries(mailer: Mailer) -> None:
    sent = mailer.send(sender="lead-1", to="@builders", subject="s", body="b")
    assert sorted(m.to_agent for m in sent.messages) == [
        "am-builder-1",
        "ov-builder-8",  # in_turn: up
        "ov-builder-9",
    ]
    everyone = mailer.send(sender="lead-1", to="@all", subject="s", body="b")
    assert "ov-scout-1" not in {m.to_agent for m in everyone.messages}  # completed


@pytest.mark.parametrize("state", ["completed", "zombie"])
def test_an_ended_agent_is_refused_whichever_registry_ended_it(
    ov: OverstoryProject, store: SqliteMailStore, mailer: Mailer, state: str
) -> None:
    ov.set_state("ov-builder-9", state)
    with pytest.raises(RecipientRefused, match=state):
        mailer.send(sender="lead-1", to="ov-builder-9", subject="s", body="b")
    # Ours ended it while Overstory still lists it as working: refused too, and out of groups.
    ov.session("am-builder-1", "builder", state="working")
    store.set_agent_state("am-builder-1", state, force=True)
    with pytest.raises(RecipientRefused, match=state):
        mailer.send(sender="lead-1", to="am-builder-1", subject="s", body="b")
    sent = mailer.send(sender="lead-1", to="@builders", subject="s", body="b")
    assert [m.to_agent for m in sent.messages] == ["ov-builder-8"]


def test_registering_an_agent_overstory_knows_keeps_one_identity(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    link = store.overstory
    adopted = link.adopt(Agent(name="ov-builder-9", capability="", channel="tmux"))
    assert (adopted.capability, adopted.parent, adopted.channel) == ("builder", "lead-1", "tmux")
    with pytest.raises(ValidationError, match="is a builder in Overstory's registry"):
        link.adopt(Agent(name="ov-builder-9", capability="scout"))
    store.add_agent(adopted)
    merged = [a for a in link.merge(store.list_agents()) if a.name == "ov-builder-9"]
    assert len(merged) == 1 and merged[0].channel == "tmux"
    sent = mailer.send(sender="lead-1", to="@builders", subject="s", body="b")
    assert sorted(m.to_agent for m in sent.messages).count("ov-builder-9") == 1


def test_a_missing_or_empty_registry_leaves_ours(tmp_path: Path) -> None:
    bare = tmp_path / "bare" / ".overstory" / "mail.db"
    store = SqliteMailStore(bare)
    store.add_agent(Agent(name="b1", capability="builder"))
    assert store.overstory is not None and store.overstory.agents() == []
    (bare.parent / "sessions.db").write_bytes(b"")  # created, no table yet
    sent = Mailer(store).send(sender="lead", to="@builders", subject="s", body="b")
    assert [m.to_agent for m in sent.messages] == ["b1"]
    store.close()


# -- item 2: banners both ways ------------------------------------------------------------------
def test_our_priority_mail_writes_overstorys_marker_byte_for_byte(
    ov: OverstoryProject, mailer: Mailer
) -> None:
    first = mailer.send(sender="lead-1", to="ov-builder-9", subject="Fix NOW", body="b",
                        priority="urgent").ids[0]  # fmt: skip
    text = ov.marker("ov-builder-9")
    assert text is not None
    created = json.loads(text)["createdAt"]
    assert re.fullmatch(ISO_Z, created)
    assert text == marker_text("lead-1", "urgent priority", "Fix NOW", first, created)
    payload = '{"taskId":"t","branch":"b","exitCode":0,"filesModified":[]}'
    latest = mailer.send(sender="lead-1", to="ov-builder-9", subject="done", body="b",
                         type="worker_done", payload=payload).ids[0]  # fmt: skip
    marker = json.loads(ov.marker("ov-builder-9") or "{}")
    assert (marker["messageId"], marker["reason"]) == (latest, "worker_done")  # latest wins
    mailer.send(sender="lead-1", to="am-builder-1", subject="fyi", body="b")
    assert ov.marker("am-builder-1") is None  # normal mail: no banner


def test_overstorys_marker_leads_our_inject_and_is_cleared(ov: OverstoryProject) -> None:
    ov.send("am-builder-1", "Fix NOW", sender="lead-1", priority="urgent")
    text, ids = fast.check_inject("am-builder-1", str(ov.mail_db))
    assert text.startswith('PRIORITY: urgent priority message from lead-1 — "Fix NOW"\n')
    assert len(ids) == 1
    assert ov.marker("am-builder-1") is None


def test_overstorys_inject_shows_the_banner_of_our_mail(
    ov: OverstoryProject, mailer: Mailer
) -> None:
    mid = mailer.send(sender="am-reviewer-1", to="ov-builder-9", subject="blocker", body="b",
                      priority="high").ids[0]  # fmt: skip
    banner, read = ov.check_inject("ov-builder-9")
    assert banner == 'PRIORITY: high priority message from am-reviewer-1 — "blocker"'
    assert read == [mid]


def test_our_own_banner_is_not_doubled_and_a_stale_one_is_dropped(
    ov: OverstoryProject, store: SqliteMailStore, mailer: Mailer
) -> None:
    mailer.send(sender="lead-1", to="am-builder-1", subject="Fix NOW", body="b", priority="urgent")
    text, _ = fast.check_inject("am-builder-1", str(ov.mail_db))
    assert text.count("PRIORITY:") == 1 and "need attention first" in text
    assert ov.marker("am-builder-1") is None
    # A marker whose mail was read meanwhile (by `ov mail check`) shows no banner.
    old = ov.send("am-builder-1", "old news", sender="lead-1", priority="urgent")[0]
    ov.check("am-builder-1")
    ov.write_marker("am-builder-1", "lead-1", "urgent priority", "old news", old)
    mailer.send(sender="lead-1", to="am-builder-1", subject="plain", body="b")
    text, _ = fast.check_inject("am-builder-1", str(ov.mail_db))
    assert "PRIORITY" not in text and "plain" in text


def test_acking_a_message_clears_the_banner_that_names_it(
    ov: OverstoryProject, store: SqliteMailStore, mailer: Mailer
) -> None:
    urgent = mailer.send(sender="lead-1", to="ov-builder-9", subject="u", body="b",
                         priority="urgent").ids[0]  # fmt: skip
    other = mailer.send(sender="lead-1", to="ov-builder-9", subject="n", body="b").ids[0]
    store.ack([other])
    assert ov.marker("ov-builder-9") is not None  # it names other mail
    store.ack([urgent])
    assert ov.marker("ov-builder-9") is None
    # The daemon's ack of a batch does the same.
    mailer.send(sender="lead-1", to="am-builder-1", subject="u2", body="b", priority="urgent")
    batch = store.claim("am-builder-1", max_messages=5, max_chars=10_000, lease_s=30, now=1e9)
    assert batch is not None and ov.marker("am-builder-1") is not None
    store.ack_delivery(batch.delivery_id, now=1e9)
    assert ov.marker("am-builder-1") is None


# -- item 4: deletion by any tool ---------------------------------------------------------------
def _ours(store: SqliteMailStore) -> dict[str, Any]:
    c = store.connection
    return {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("am_nudges", "am_deliveries", "am_idempotency")}  # fmt: skip


def test_overstorys_purge_leaves_nothing_that_matters(
    ov: OverstoryProject, store: SqliteMailStore, mailer: Mailer
) -> None:
    mailer.send(sender="lead-1", to="am-builder-1", subject="u", body="b", priority="urgent",
                idempotency_key="k1")  # fmt: skip
    batch = store.claim("am-builder-1", max_messages=5, max_chars=10_000, lease_s=30, now=1e9)
    assert batch is not None
    store.release(batch.delivery_id, error="x", max_attempts=1, now=1e9)  # a dead letter
    assert ov.purge_all() == 1
    # Readers tolerate what is left: no dead letter, no count, no banner, the key is free.
    assert store.dead_letters() == []
    assert "am-builder-1" not in store.counts()
    assert store.take_nudges("am-builder-1") == []
    again = mailer.send(sender="lead-1", to="am-builder-1", subject="u", body="b",
                        priority="urgent", idempotency_key="k1")  # fmt: skip
    assert not again.duplicate and len(again.ids) == 1
    ov.purge_all()
    assert store.sweep_orphans() >= 2
    assert _ours(store) == {"am_nudges": 0, "am_deliveries": 0, "am_idempotency": 0}


def test_our_purge_and_the_daemons_housekeeping_sweep_orphans(
    ov: OverstoryProject, store: SqliteMailStore, mailer: Mailer
) -> None:
    import anyio

    from agentmaild.config import StoreConfig
    from agentmaild.daemon.retention import HistoryPruner
    from agentmaild.store.aio import AsyncMailStore

    mailer.send(sender="lead-1", to="am-builder-1", subject="u", body="b", priority="urgent",
                idempotency_key="k2")  # fmt: skip
    ov.purge_all()
    assert store.purge(older_than="1970-01-01T00:00:00.000Z") == 0  # selects nothing...
    assert _ours(store)["am_nudges"] == 0  # ...yet sweeps
    mailer.send(sender="lead-1", to="am-builder-1", subject="v", body="b", priority="urgent",
                idempotency_key="k3")  # fmt: skip
    ov.purge_all()

    async def housekeeping() -> None:
        pruner = HistoryPruner(AsyncMailStore(store), StoreConfig, anyio.Event())
        await pruner.prune()

    anyio.run(housekeeping)
    assert _ours(store) == {"am_nudges": 0, "am_deliveries": 0, "am_idempotency": 0}


def test_a_recipient_written_by_another_tool_never_leads_outside_the_banner_directory(
    ov: OverstoryProject, store: SqliteMailStore
) -> None:
    victim = ov.dir / "evil.json"
    victim.write_text("keep", encoding="utf-8")
    mid = ov.send("../evil", "x", sender="lead-1")[0]  # Overstory takes any recipient name
    assert store.ack([mid]) == [mid]
    assert victim.read_text(encoding="utf-8") == "keep"
