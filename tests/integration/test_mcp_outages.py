"""``agentmaild mcp`` when things go wrong under it (issue 29's bad input): a store file deleted or
replaced while the session is open, and arguments far past every limit. Each is a tool error
naming the problem, the server keeps answering, and nothing is half-written (no message stored,
no new store file made at the path)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from agentmaild.mail.mailer import Mailer
from agentmaild.mcpserver.schema import ACK_MAX
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.mcp_client import mcp_session, text_of
from tests.support.store_targets import StoreTarget, ok

ALL_TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("send", {"to": "bob", "subject": "after"}),
    ("reply", {"id": "msg-0mx90000000000000", "body": "x"}),
    ("inbox", {}), ("read", {"id": "msg-0mx90000000000000"}), ("ack", {"ids": ["msg-0mx9000"]}),
    ("check", {}), ("team", {}), ("thread", {"id": "msg-0mx90000000000000"}),
    ("ask", {"to": "bob", "subject": "q", "body": "b", "timeout_s": 1}),
]  # fmt: skip


def _sqlite_team(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
    store.add_agent(Agent(name="bob", capability="lead", channel="pull"))
    store.close()
    env = {**os.environ, "AGENTMAIL_DB": str(db), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "XDG_STATE_HOME": str(tmp_path / "state")}  # fmt: skip
    return db, env


def _unlink_store(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


async def test_a_deleted_store_is_a_tool_error_and_nothing_is_written(tmp_path: Path) -> None:
    db, env = _sqlite_team(tmp_path)
    async with mcp_session(env, "--agent", "alice") as (s, _):
        assert not (await s.call_tool("send", {"to": "bob", "subject": "before"})).is_error
        _unlink_store(db)
        for tool, args in ALL_TOOLS:
            gone = await s.call_tool(tool, args)
            assert gone.is_error, (tool, text_of(gone))
            assert text_of(gone) == (
                f"error: store {db} was deleted since this MCP server started; nothing was "
                "done. Restart the agent's session once the store is back"
            ), tool
            assert gone.structured_content["error"]["code"] == "store"
        with pytest.raises(MCPError, match="was deleted since"):
            await s.read_resource("mail://inbox")
        # Still serving: the protocol answers, and every call says the same.
        assert {t.name for t in (await s.list_tools()).tools} >= {"send", "check"}
        assert (await s.call_tool("send", {"to": "bob", "subject": "again"})).is_error
    # No new store was made at the path (a fresh connection would have made an empty one).
    assert not db.exists() and sorted(p.name for p in db.parent.iterdir()) == [".gitignore"]


async def test_a_replaced_store_is_refused_and_the_new_file_is_left_alone(
    tmp_path: Path,
) -> None:
    db, env = _sqlite_team(tmp_path)
    async with mcp_session(env, "--agent", "alice") as (s, _):
        assert not (await s.call_tool("send", {"to": "bob", "subject": "one"})).is_error
        backup = tmp_path / "store" / "backup.db"
        other = SqliteMailStore(backup)
        other.add_agent(Agent(name="bob", capability="lead", channel="pull"))
        other.close()
        _unlink_store(db)
        os.rename(backup, db)  # `mv backup.db mail.db`: another inode at the path
        sent = await s.call_tool("send", {"to": "bob", "subject": "two"})
        assert sent.is_error and "was replaced by another file" in text_of(sent)
        checked = await s.call_tool("check", {})
        assert checked.is_error and "was replaced by another file" in text_of(checked)
    store = SqliteMailStore(db, readonly=True)
    try:
        assert store.inbox("bob") == []  # the new file got nothing
    finally:
        store.close()


async def test_huge_arguments_are_tool_errors_naming_the_limit(store_target: StoreTarget) -> None:
    t = store_target
    store = t.open()
    try:
        store.add_agent(Agent(name="alice", capability="builder", channel="pull"))
        store.add_agent(Agent(name="bob", capability="lead", channel="pull"))
        [asked] = Mailer(store).send(sender="bob", to="alice", subject="q", body="b").ids
    finally:
        store.close()
    big = "x" * 8_000_000
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("send", {"to": "bob", "subject": "s", "body": big}, "body: 8000000 bytes, the limit is"),
        ("send", {"to": "bob", "subject": big}, "subject: 8000000 characters, the limit is"),
        ("send", {"to": "bob", "subject": "s", "type": "worker_done", "payload": {"k": big}},
         "payload: larger than"),
        ("send", {"to": big, "subject": "s"}, "invalid recipient"),
        ("send", {"to": "bob", "subject": "s", "thread": big}, "invalid message id"),
        ("send", {"to": "bob", "subject": "s", "idempotency_key": big}, "idempotency key: 1-200"),
        ("reply", {"id": asked, "body": big}, "body: 8000000 bytes"),
        ("ack", {"ids": ["msg-x"] * (ACK_MAX + 1)}, f"ids: {ACK_MAX + 1} items, at most {ACK_MAX}"),
    ]  # fmt: skip
    async with mcp_session(t.env, "--agent", "alice") as (s, _):
        for tool, args, words in cases:
            result = await s.call_tool(tool, args)
            assert result.is_error and words in text_of(result), (tool, text_of(result)[:300])
            assert len(text_of(result)) < 400  # the error names the problem, not the input
        fine = await s.call_tool("send", {"to": "bob", "subject": "fine"})
        assert not fine.is_error, text_of(fine)
    assert [m["subject"] for m in ok(t.env, "inbox", "--agent", "bob")["messages"]] == ["fine"]
