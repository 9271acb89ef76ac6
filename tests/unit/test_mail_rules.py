"""The mail rules (SPEC §3) through ``Mailer`` on a real SQLite file.

Groups, recipient refusal, reply inference, idempotency, payload validation for every protocol
type, size limits, the unread cap, the rate limit, nudge markers and non-delivery reports.
"""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentmaild.errors import (
    Conflict,
    InboxFull,
    NotFound,
    RateLimited,
    RecipientRefused,
    ValidationError,
)
from agentmaild.hot import check as fast
from agentmaild.mail.mailer import Limits, Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore

ID_RE = re.compile(r"msg-[a-z0-9]+")
STAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


# ---- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "mail.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteMailStore]:
    s = SqliteMailStore(db)
    yield s
    s.close()


@pytest.fixture
def mailer(store: SqliteMailStore) -> Mailer:
    return Mailer(store)


def add(
    store: SqliteMailStore, name: str, capability: str = "builder", state: str | None = None
) -> None:
    store.add_agent(Agent(name=name, capability=capability))
    if state is not None:
        store.set_agent_state(name, state, force=True)


def rows(db: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM messages ORDER BY id")]
    finally:
        conn.close()


def count(db: Path) -> int:
    return len(rows(db))


def team(store: SqliteMailStore) -> None:
    """lead1 (lead), b1 b2 (builders), r1 (reviewer), b3 (a completed builder), z1 (zombie)."""
    add(store, "lead1", "lead")
    add(store, "b1")
    add(store, "b2")
    add(store, "r1", "reviewer")
    add(store, "b3", state="completed")
    add(store, "z1", "reviewer", state="zombie")


# ---- send ------------------------------------------------------------------------------------


def test_send_returns_ids_and_stores_one_row_in_overstory_format(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    add(store, "b1")
    sent = mailer.send(sender="lead1", to="b1", subject="hello", body="world")
    assert len(sent.ids) == 1
    assert ID_RE.fullmatch(sent.ids[0])
    assert sent.broadcast_id is None
    assert sent.duplicate is False
    (row,) = rows(db)
    assert row["id"] == sent.ids[0]
    assert (row["from_agent"], row["to_agent"]) == ("lead1", "b1")
    assert (row["subject"], row["body"]) == ("hello", "world")
    assert (row["type"], row["priority"], row["read"]) == ("status", "normal", 0)
    assert row["thread_id"] is None and row["payload"] is None
    assert STAMP_RE.fullmatch(row["created_at"]), row["created_at"]
    assert sent.to_dict()["ids"] == sent.ids


def test_ids_are_unique_and_time_ordered(store: SqliteMailStore, mailer: Mailer) -> None:
    ids = [
        mailer.send(sender="a", to="operator", subject="s", body=str(i)).ids[0] for i in range(50)
    ]
    assert len(set(ids)) == 50
    assert ids == sorted(ids)
    assert all(ID_RE.fullmatch(i) for i in ids)


def test_operator_is_always_a_valid_recipient(mailer: Mailer, store: SqliteMailStore) -> None:
    assert store.list_agents() == []
    sent = mailer.send(sender="b1", to="operator", subject="help", body="")
    assert store.get_message(sent.ids[0]) is not None


# ---- groups ----------------------------------------------------------------------------------


def _fanout(store: SqliteMailStore, sent_ids: list[str]) -> tuple[set[str], set[str | None]]:
    msgs = [store.get_message(i) for i in sent_ids]
    assert all(m is not None for m in msgs)
    return {m.to_agent for m in msgs if m}, {m.broadcast_id for m in msgs if m}


@pytest.mark.parametrize(
    ("sender", "group", "expected"),
    [
        ("lead1", "@all", {"b1", "b2", "r1"}),
        ("operator", "@all", {"lead1", "b1", "b2", "r1"}),
        ("b1", "@builder", {"b2"}),
        ("operator", "@builders", {"b1", "b2"}),
        ("lead1", "@reviewers", {"r1"}),
    ],
)
def test_group_fans_out_one_row_each_sender_excluded_one_broadcast_id(
    store: SqliteMailStore, mailer: Mailer, db: Path, sender: str, group: str, expected: set[str]
) -> None:
    team(store)
    sent = mailer.send(sender=sender, to=group, subject="all hands", body="standup")
    assert len(sent.ids) == len(expected) == len(set(sent.ids))
    recipients, broadcast_ids = _fanout(store, sent.ids)
    assert recipients == expected
    assert sender not in recipients
    assert broadcast_ids == {sent.broadcast_id}
    assert sent.broadcast_id is not None
    assert count(db) == len(expected)


def test_empty_group_is_an_error_listing_valid_groups(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    team(store)
    with pytest.raises(ValidationError) as info:
        mailer.send(sender="lead1", to="@scouts", subject="s", body="b")
    assert "@all" in info.value.message and "@builder" in info.value.message
    # a group whose only member is the sender is empty too
    add(store, "m1", "merger")
    with pytest.raises(ValidationError, match="@all"):
        mailer.send(sender="m1", to="@merger", subject="s", body="b")
    assert count(db) == 0


def test_group_of_only_completed_agents_is_empty(store: SqliteMailStore, mailer: Mailer) -> None:
    add(store, "s1", "scout", state="completed")
    add(store, "s2", "scout", state="zombie")
    with pytest.raises(ValidationError, match="valid groups"):
        mailer.send(sender="operator", to="@scouts", subject="s", body="b")


def test_unknown_group_is_an_error_listing_valid_groups(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    team(store)
    add(store, "x1", "janitor")  # a custom capability is a valid group too
    with pytest.raises(ValidationError) as info:
        mailer.send(sender="lead1", to="@wizards", subject="s", body="b")
    msg = info.value.message
    assert "@wizards" in msg
    for group in ("@all", "@builder", "@reviewer", "@janitor"):
        assert group in msg
    assert count(db) == 0
    sent = mailer.send(sender="lead1", to="@janitors", subject="s", body="b")
    assert _fanout(store, sent.ids)[0] == {"x1"}


# ---- recipients ------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["completed", "zombie"])
def test_send_refuses_completed_and_zombie_recipients_saying_why(
    store: SqliteMailStore, mailer: Mailer, db: Path, state: str
) -> None:
    add(store, "b1", state=state)
    with pytest.raises(RecipientRefused) as info:
        mailer.send(sender="lead1", to="b1", subject="s", body="b")
    assert state in info.value.message and "b1" in info.value.message
    assert count(db) == 0


@pytest.mark.parametrize("state", ["completed", "zombie"])
def test_reply_refuses_completed_and_zombie_recipients_saying_why(
    store: SqliteMailStore, mailer: Mailer, db: Path, state: str
) -> None:
    add(store, "b1")
    original = mailer.send(sender="b1", to="operator", subject="done?", body="").ids[0]
    store.set_agent_state("b1", state, force=True)
    with pytest.raises(RecipientRefused) as info:
        mailer.reply(original, sender="operator", body="yes")
    assert state in info.value.message
    assert count(db) == 1


def test_unknown_recipient_refused_unless_configured(store: SqliteMailStore, db: Path) -> None:
    with pytest.raises(RecipientRefused, match="ghost"):
        Mailer(store).send(sender="lead1", to="ghost", subject="s", body="b")
    assert count(db) == 0
    lenient = Mailer(store, Limits(refuse_unknown_recipients=False))
    sent = lenient.send(sender="lead1", to="ghost", subject="s", body="b")
    assert store.get_message(sent.ids[0]).to_agent == "ghost"  # type: ignore[union-attr]


def test_a_refused_member_fails_nothing_partially(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    """An unknown recipient anywhere means no row at all (one transaction)."""
    add(store, "b1")
    with pytest.raises(RecipientRefused):
        mailer.send(sender="lead1", to="nobody", subject="s", body="b")
    mailer.send(sender="lead1", to="b1", subject="s", body="b")
    assert count(db) == 1


# ---- reply -----------------------------------------------------------------------------------


def test_reply_inference(store: SqliteMailStore, mailer: Mailer) -> None:
    for name in ("a1", "b1", "c1"):
        add(store, name)
    orig_id = mailer.send(
        sender="a1", to="b1", subject="Plan", body="?", type="question", priority="high"
    ).ids[0]

    # from the recipient (anyone but the sender) -> the original sender
    r1 = store.get_message(mailer.reply(orig_id, sender="b1", body="ok").ids[0])
    assert r1 is not None
    assert (r1.from_agent, r1.to_agent) == ("b1", "a1")
    assert r1.subject == "Re: Plan"
    assert r1.thread_id == orig_id
    assert (r1.type, r1.priority) == ("question", "high")

    # from the original sender -> the original recipient
    r2 = store.get_message(mailer.reply(orig_id, sender="a1", body="more").ids[0])
    assert r2 is not None and (r2.from_agent, r2.to_agent) == ("a1", "b1")

    # from a third party -> the original sender
    r3 = store.get_message(mailer.reply(orig_id, sender="c1", body="me too").ids[0])
    assert r3 is not None and (r3.from_agent, r3.to_agent) == ("c1", "a1")

    # a reply to a reply stays in the thread and does not stack "Re: "
    r4 = store.get_message(mailer.reply(r1.id, sender="a1", body="thanks").ids[0])
    assert r4 is not None
    assert r4.to_agent == "b1"
    assert r4.subject == "Re: Plan"
    assert r4.thread_id == orig_id
    assert [m.id for m in store.thread(orig_id)] == [orig_id, r1.id, r2.id, r3.id, r4.id]


def test_reply_uses_the_originals_thread_when_it_has_one(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    add(store, "b1")
    root = mailer.send(sender="operator", to="b1", subject="root", body="").ids[0]
    child = mailer.send(sender="operator", to="b1", subject="child", body="", thread_id=root).ids[0]
    reply = store.get_message(mailer.reply(child, sender="b1", body="r").ids[0])
    assert reply is not None
    assert reply.thread_id == root
    assert reply.to_agent == "operator"
    assert reply.subject == "Re: child"


def test_reply_inherits_a_protocol_type_when_given_its_payload(
    store: SqliteMailStore, mailer: Mailer
) -> None:
    add(store, "lead1", "lead")
    orig = mailer.send(
        sender="operator",
        to="lead1",
        subject="go",
        body="",
        type="dispatch",
        priority="urgent",
        payload=json.dumps(VALID["dispatch"]),
    ).ids[0]
    reply = store.get_message(
        mailer.reply(orig, sender="lead1", body="", payload=json.dumps(VALID["dispatch"])).ids[0]
    )
    assert reply is not None
    assert (reply.type, reply.priority, reply.to_agent) == ("dispatch", "urgent", "operator")


def test_reply_to_unknown_or_malformed_id(mailer: Mailer) -> None:
    with pytest.raises(NotFound):
        mailer.reply("msg-doesnotexist00", sender="operator", body="x")
    for bad in ("../x", "/etc/passwd", "msg-../../x", "msg-abc\n", "msg-a\x01b"):
        with pytest.raises(ValidationError, match="invalid message id"):
            mailer.reply(bad, sender="operator", body="x")


# ---- idempotency -----------------------------------------------------------------------------


def test_idempotency_same_key_same_content_returns_the_same_ids(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    team(store)
    first = mailer.send(sender="lead1", to="@builders", subject="s", body="b", idempotency_key="k1")
    again = mailer.send(sender="lead1", to="@builders", subject="s", body="b", idempotency_key="k1")
    assert again.ids == first.ids
    assert again.duplicate is True and first.duplicate is False
    assert again.broadcast_id == first.broadcast_id
    assert count(db) == 2
    # the key is the sender's: another sender may use it for its own mail
    other = mailer.send(sender="r1", to="@builders", subject="s", body="b", idempotency_key="k1")
    assert set(other.ids).isdisjoint(first.ids)
    assert count(db) == 4


def test_idempotency_same_key_other_content_is_a_conflict(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    add(store, "b1")
    mailer.send(sender="lead1", to="b1", subject="s", body="b", idempotency_key="k")
    with pytest.raises(Conflict, match="k"):
        mailer.send(sender="lead1", to="b1", subject="s", body="other", idempotency_key="k")
    with pytest.raises(Conflict):
        mailer.send(
            sender="lead1", to="b1", subject="s", body="b", priority="high", idempotency_key="k"
        )
    assert count(db) == 1


def test_idempotent_retry_returns_the_original_even_if_the_recipient_completed(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    """A retry is answered from the key, whatever happened to the recipient since (SPEC §3)."""
    add(store, "b1")
    first = mailer.send(sender="lead1", to="b1", subject="s", body="b", idempotency_key="k")
    store.set_agent_state("b1", "completed")
    again = mailer.send(sender="lead1", to="b1", subject="s", body="b", idempotency_key="k")
    assert again.ids == first.ids and again.duplicate is True
    assert count(db) == 1


# ---- payloads --------------------------------------------------------------------------------

VALID: dict[str, dict[str, Any]] = {
    "worker_done": {"taskId": "t-1", "branch": "feat/x", "exitCode": 0, "filesModified": ["a.py"]},
    "worker_died": {"agentName": "b1", "reason": "oom", "taskId": None, "exitCode": 137},
    "merge_ready": {"branch": "feat/x", "taskId": "t-1", "agentName": "b1", "filesModified": []},
    "merged": {"branch": "feat/x", "taskId": "t-1", "tier": "clean-merge"},
    "merge_failed": {
        "branch": "feat/x",
        "taskId": "t-1",
        "conflictFiles": ["a.py"],
        "errorMessage": "conflict",
    },
    "escalation": {"severity": "critical", "taskId": None, "context": "stuck"},
    "health_check": {"agentName": "b1", "checkType": "liveness"},
    "dispatch": {
        "taskId": "t-1",
        "specPath": "specs/x.md",
        "capability": "builder",
        "fileScope": ["src/"],
        "skipScouts": True,
        "maxAgents": 3,
    },
    "assign": {"taskId": "t-1", "specPath": "specs/x.md", "workerName": "b1", "branch": "feat/x"},
    "decision_gate": {"options": ["ship", "wait"], "context": "release?", "deadline": "soon"},
}
MISSING = {
    "worker_done": "exitCode",
    "worker_died": "reason",
    "merge_ready": "agentName",
    "merged": "tier",
    "merge_failed": "errorMessage",
    "escalation": "severity",
    "health_check": "checkType",
    "dispatch": "fileScope",
    "assign": "workerName",
    "decision_gate": "options",
}
WRONG: dict[str, tuple[str, Any]] = {
    "worker_done": ("exitCode", "zero"),
    "worker_died": ("agentName", 5),
    "merge_ready": ("filesModified", "a.py"),
    "merged": ("tier", "magic"),
    "merge_failed": ("conflictFiles", [1, 2]),
    "escalation": ("severity", "meh"),
    "health_check": ("checkType", None),
    "dispatch": ("skipScouts", "yes"),
    "assign": ("taskId", 7),
    "decision_gate": ("options", "ship"),
}
PROTOCOL = sorted(VALID)


def test_all_ten_protocol_types_are_covered() -> None:
    assert len(PROTOCOL) == 10
    assert set(PROTOCOL) == set(MISSING) == set(WRONG)


@pytest.mark.parametrize("msg_type", PROTOCOL)
def test_valid_payload_is_stored_canonically(
    store: SqliteMailStore, mailer: Mailer, msg_type: str
) -> None:
    sent = mailer.send(
        sender="lead1",
        to="operator",
        subject="p",
        body="",
        type=msg_type,
        payload=json.dumps(VALID[msg_type], indent=2),
    )
    m = store.get_message(sent.ids[0])
    assert m is not None and m.type == msg_type
    assert json.loads(m.payload or "") == VALID[msg_type]


@pytest.mark.parametrize("msg_type", PROTOCOL)
def test_missing_required_payload_field_names_the_field(
    mailer: Mailer, db: Path, msg_type: str
) -> None:
    field = MISSING[msg_type]
    payload = {k: v for k, v in VALID[msg_type].items() if k != field}
    with pytest.raises(ValidationError) as info:
        mailer.send(
            sender="lead1",
            to="operator",
            subject="p",
            body="",
            type=msg_type,
            payload=json.dumps(payload),
        )
    assert f"payload.{field}" in info.value.message
    assert count(db) == 0


@pytest.mark.parametrize("msg_type", PROTOCOL)
def test_wrong_typed_payload_field_names_the_field(mailer: Mailer, db: Path, msg_type: str) -> None:
    field, bad = WRONG[msg_type]
    payload = {**VALID[msg_type], field: bad}
    with pytest.raises(ValidationError) as info:
        mailer.send(
            sender="lead1",
            to="operator",
            subject="p",
            body="",
            type=msg_type,
            payload=json.dumps(payload),
        )
    assert f"payload.{field}" in info.value.message
    assert count(db) == 0


@pytest.mark.parametrize("msg_type", PROTOCOL)
def test_protocol_type_without_payload_or_with_non_object_is_refused(
    mailer: Mailer, msg_type: str
) -> None:
    with pytest.raises(ValidationError, match="payload"):
        mailer.send(sender="lead1", to="operator", subject="p", body="", type=msg_type)
    with pytest.raises(ValidationError, match="payload"):
        mailer.send(
            sender="lead1", to="operator", subject="p", body="", type=msg_type, payload="[1, 2]"
        )
    with pytest.raises(ValidationError, match="payload"):
        mailer.send(
            sender="lead1", to="operator", subject="p", body="", type=msg_type, payload="{not json"
        )


@pytest.mark.parametrize("raw", ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}'])
def test_payload_must_be_strict_json(mailer: Mailer, db: Path, raw: str) -> None:
    """NaN/Infinity are not JSON (RFC 8259): Overstory's JSON.parse would choke on the row."""
    with pytest.raises(ValidationError, match="payload"):
        mailer.send(sender="a", to="operator", subject="s", body="", payload=raw)
    assert count(db) == 0


def test_unknown_type_and_priority_are_refused(mailer: Mailer, db: Path) -> None:
    with pytest.raises(ValidationError, match="type"):
        mailer.send(sender="a", to="operator", subject="s", body="", type="gossip")
    with pytest.raises(ValidationError, match="priority"):
        mailer.send(sender="a", to="operator", subject="s", body="", priority="asap")
    assert count(db) == 0


# ---- limits ----------------------------------------------------------------------------------


def test_subject_limit(mailer: Mailer, db: Path) -> None:
    mailer.send(sender="a", to="operator", subject="s" * 256, body="")
    with pytest.raises(ValidationError, match="subject"):
        mailer.send(sender="a", to="operator", subject="s" * 257, body="")
    assert count(db) == 1


def test_body_limit_counts_bytes(mailer: Mailer, db: Path) -> None:
    mailer.send(sender="a", to="operator", subject="s", body="x" * 65536)
    with pytest.raises(ValidationError, match="body"):
        mailer.send(sender="a", to="operator", subject="s", body="x" * 65537)
    with pytest.raises(ValidationError, match="body"):
        mailer.send(sender="a", to="operator", subject="s", body="é" * 32769)  # 65538 bytes
    assert count(db) == 1


def test_payload_limit(mailer: Mailer, db: Path) -> None:
    small = json.dumps({"note": "x" * 16000})
    mailer.send(sender="a", to="operator", subject="s", body="", payload=small)
    big = json.dumps({"note": "x" * 16400})
    assert len(big) > 16384
    with pytest.raises(ValidationError, match="payload"):
        mailer.send(sender="a", to="operator", subject="s", body="", payload=big)
    big_done = json.dumps({**VALID["worker_done"], "filesModified": ["f" * 100] * 170})
    with pytest.raises(ValidationError, match="payload"):
        mailer.send(
            sender="a", to="operator", subject="s", body="", type="worker_done", payload=big_done
        )
    assert count(db) == 1


def test_unread_cap_is_backpressure_per_recipient(store: SqliteMailStore, db: Path) -> None:
    add(store, "b1")
    add(store, "b2")
    store.set_team_rules({"unread_max": 3}, now=0)  # the store's rule, as its daemon writes it
    mailer = Mailer(store)
    ids = [mailer.send(sender="a", to="b1", subject="s", body=str(i)).ids[0] for i in range(3)]
    with pytest.raises(InboxFull, match="b1"):
        mailer.send(sender="a", to="b1", subject="s", body="full")
    mailer.send(sender="a", to="b2", subject="s", body="other inbox")  # per recipient
    with pytest.raises(InboxFull):  # a group with one full member writes nothing
        mailer.send(sender="a", to="@builders", subject="s", body="fan")
    assert count(db) == 4
    store.ack(ids[:1])
    mailer.send(sender="a", to="b1", subject="s", body="room again")
    assert count(db) == 5


def test_rate_limit_per_pair_and_reset(store: SqliteMailStore, db: Path) -> None:
    add(store, "b1")
    add(store, "b2")
    store.set_team_rules({"rate_limit_max": 2, "rate_limit_window_s": 60}, now=0)
    mailer = Mailer(store)
    for i in range(2):
        mailer.send(sender="a1", to="b1", subject="s", body=str(i))
    with pytest.raises(RateLimited, match="a1"):
        mailer.send(sender="a1", to="b1", subject="s", body="third")
    # other pairs are not affected
    mailer.send(sender="a1", to="b2", subject="s", body="x")
    mailer.send(sender="c1", to="b1", subject="s", body="x")
    assert count(db) == 4
    assert store.reset_rate_limit("a1", "b1") >= 2
    mailer.send(sender="a1", to="b1", subject="s", body="after reset")
    assert count(db) == 5


def test_rate_limit_off_by_default(store: SqliteMailStore, mailer: Mailer, db: Path) -> None:
    for i in range(30):
        mailer.send(sender="a1", to="operator", subject="s", body=str(i))
    assert count(db) == 30


def test_nul_and_empty_subject_are_refused(mailer: Mailer, db: Path) -> None:
    with pytest.raises(ValidationError, match="subject"):
        mailer.send(sender="a", to="operator", subject="   ", body="")
    with pytest.raises(ValidationError, match="body"):
        mailer.send(sender="a", to="operator", subject="s", body="a\x00b")
    assert count(db) == 0


# ---- nudges ----------------------------------------------------------------------------------

NUDGING = [
    ("status", "urgent"),
    ("question", "high"),
    ("worker_done", "normal"),
    ("merge_ready", "low"),
    ("error", "normal"),
    ("escalation", "normal"),
    ("merge_failed", "normal"),
]


@pytest.mark.parametrize(("msg_type", "priority"), NUDGING)
def test_nudge_marker_puts_priority_banner_first(
    store: SqliteMailStore, mailer: Mailer, db: Path, msg_type: str, priority: str
) -> None:
    add(store, "b1")
    mailer.send(sender="lead1", to="b1", subject="plain", body="first")
    payload = json.dumps(VALID[msg_type]) if msg_type in VALID else None
    mailer.send(
        sender="lead1",
        to="b1",
        subject="look at me",
        body="",
        type=msg_type,
        priority=priority,
        payload=payload,
    )
    text, ids = fast.check_inject("b1", str(db))
    assert len(ids) == 2
    assert text.startswith("PRIORITY:"), text[:200]
    assert "look at me" in text.splitlines()[0]
    # the marker is consumed: the next check has no banner (and no mail)
    mailer.send(sender="lead1", to="b1", subject="later", body="")
    text2, _ = fast.check_inject("b1", str(db))
    assert not text2.startswith("PRIORITY:")


@pytest.mark.parametrize(
    ("msg_type", "priority"),
    [("status", "normal"), ("result", "low"), ("question", "normal"), ("merged", "normal")],
)
def test_ordinary_mail_has_no_banner(
    store: SqliteMailStore, mailer: Mailer, db: Path, msg_type: str, priority: str
) -> None:
    add(store, "b1")
    payload = json.dumps(VALID[msg_type]) if msg_type in VALID else None
    mailer.send(
        sender="lead1",
        to="b1",
        subject="fyi",
        body="",
        type=msg_type,
        priority=priority,
        payload=payload,
    )
    text, ids = fast.check_inject("b1", str(db))
    assert len(ids) == 1
    assert "PRIORITY:" not in text
    assert text.startswith("[agentmail]")


def test_acked_urgent_mail_leaves_no_banner(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    add(store, "b1")
    urgent = mailer.send(sender="lead1", to="b1", subject="fire", body="", priority="urgent").ids
    store.ack(urgent)
    mailer.send(sender="lead1", to="b1", subject="calm", body="")
    text, _ = fast.check_inject("b1", str(db))
    assert "PRIORITY:" not in text and "calm" in text


def test_group_nudges_every_recipient(store: SqliteMailStore, mailer: Mailer, db: Path) -> None:
    team(store)
    mailer.send(sender="lead1", to="@builders", subject="freeze", body="", priority="urgent")
    for name in ("b1", "b2"):
        text, ids = fast.check_inject(name, str(db))
        assert len(ids) == 1 and text.startswith("PRIORITY:")


# ---- non-delivery reports --------------------------------------------------------------------


def test_non_delivery_report_mails_each_original_sender(
    store: SqliteMailStore, mailer: Mailer, db: Path
) -> None:
    add(store, "a1")
    add(store, "a2")
    add(store, "b1")
    lost = [
        mailer.send(sender="a1", to="b1", subject="one", body=""),
        mailer.send(sender="a1", to="b1", subject="two", body=""),
        mailer.send(sender="a2", to="b1", subject="three", body=""),
    ]
    messages = [store.get_message(s.ids[0]) for s in lost]
    mailer.non_delivery_report("b1", [m for m in messages if m], "pane gone")
    reports = [r for r in rows(db) if r["type"] == "error"]
    assert sorted(r["to_agent"] for r in reports) == ["a1", "a2"]
    by_to = {r["to_agent"]: r for r in reports}
    assert lost[0].ids[0] in by_to["a1"]["body"] and lost[1].ids[0] in by_to["a1"]["body"]
    assert lost[2].ids[0] in by_to["a2"]["body"] and lost[0].ids[0] not in by_to["a2"]["body"]
    assert "pane gone" in by_to["a1"]["body"] and "b1" in by_to["a1"]["subject"]
    assert all(ID_RE.fullmatch(r["id"]) and STAMP_RE.fullmatch(r["created_at"]) for r in reports)
    text, ids = fast.check_inject("a1", str(db))
    assert ids == [by_to["a1"]["id"]]
    assert text.startswith("PRIORITY:")


# ---- property tests --------------------------------------------------------------------------

TEXT = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
_counter = itertools.count()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    subject=st.text(TEXT, min_size=1, max_size=256).filter(lambda s: s.strip()),
    body=st.text(TEXT, max_size=3000),
)
@example(subject="Re: ünïcødé ✉ 🚀", body="line1\r\nline2\n\t<<<body msg-x\n")
@example(subject="  padded  ", body="   ")
def test_text_round_trips_exactly(
    store: SqliteMailStore, mailer: Mailer, subject: str, body: str
) -> None:
    sent = mailer.send(sender="a1", to="operator", subject=subject, body=body)
    m = store.get_message(sent.ids[0])
    assert m is not None
    assert m.subject == subject
    assert m.body == body


def _bad_name(s: str) -> bool:
    return NAME_RE.fullmatch(s) is None


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.text(max_size=70).filter(_bad_name))
@example(name="b1\n")
@example(name="../x")
@example(name="Builder")
@example(name="")
@example(name="a" * 65)
@example(name="-x")
@example(name="b1\x00")
def test_names_outside_the_pattern_are_rejected(mailer: Mailer, db: Path, name: str) -> None:
    before = count(db)  # the store is shared by the examples
    with pytest.raises(ValidationError):
        mailer.send(sender=name, to="operator", subject="s", body="")
    if not name.startswith("@"):
        lenient = Mailer(mailer.store, Limits(refuse_unknown_recipients=False))
        with pytest.raises(ValidationError):
            lenient.send(sender="a1", to=name, subject="s", body="")
    assert count(db) == before


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,63}\Z"))
def test_names_inside_the_pattern_are_accepted(store: SqliteMailStore, name: str) -> None:
    lenient = Mailer(store, Limits(refuse_unknown_recipients=False))
    sent = lenient.send(sender=name, to=name, subject="s", body=str(next(_counter)))
    m = store.get_message(sent.ids[0])
    assert m is not None and m.from_agent == name == m.to_agent
