"""One tool call: its arguments checked against the tool's schema, the door's answer, and what the
model gets back (structured content and a text block; ``present`` frames the bodies)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentmaild.errors import AgentmaildError, ValidationError
from agentmaild.mcpserver.doors import Door
from agentmaild.mcpserver.present import as_text, framed, without_bodies
from agentmaild.mcpserver.schema import BY_NAME, checked_arguments

Answer = tuple[dict[str, Any], str]


class AskTimeout(AgentmaildError):
    code = "timeout"


def _sent(door: Door, args: dict[str, Any], reply: bool) -> Answer:
    data = door.reply(args) if reply else door.send(args)
    verb = "duplicate of earlier send" if data.get("duplicate") else "sent"
    return data, f"{verb}: {' '.join(data['ids'])}"


def _inbox(door: Door, args: dict[str, Any]) -> Answer:
    rows = door.inbox(bool(args.get("unread", True)))
    data = {"ok": True, "agent": door.agent, "messages": rows}
    return data, as_text(data) if rows else f"no mail for {door.agent}"


def _read(door: Door, args: dict[str, Any]) -> Answer:
    rows = door.read(args["id"])
    text = framed(rows, door.agent, "fetched")
    return {"ok": True, "message": without_bodies(rows)[0], "text": text}, text


def _ack(door: Door, args: dict[str, Any]) -> Answer:
    ids = list(args["ids"])
    done = door.ack(ids)
    skipped = [i for i in ids if i not in done]
    text = f"acked {len(done)}" + (f"; already read or unknown: {' '.join(skipped)}" if skipped
                                   else "")  # fmt: skip
    return {"ok": True, "acked": done, "skipped": skipped}, text


def _check(door: Door, args: dict[str, Any]) -> Answer:
    text, ids = door.check()
    return {"ok": True, "acked": ids, "text": text}, text or f"no unread mail for {door.agent}"


def _ask(door: Door, args: dict[str, Any]) -> Answer:
    from agentmaild.rules.ask import timeout_message

    question, reply = door.ask(args)
    if reply is None:
        wait_s = float(args.get("timeout_s", 600))
        raise AskTimeout(timeout_message(question["id"], question["to"], door.agent, wait_s))
    text = framed([reply], door.agent, "reply")
    data = {"ok": True, "question_id": question["id"], "reply": without_bodies([reply])[0],
            "text": text}  # fmt: skip
    return data, text


def _team(door: Door, args: dict[str, Any]) -> Answer:
    rows = door.team()
    return {"ok": True, "agents": rows}, as_text(rows) if rows else "no agents registered"


def _thread(door: Door, args: dict[str, Any]) -> Answer:
    from agentmaild.errors import NotFound

    rows = door.thread(args["id"])
    if not rows:
        raise NotFound(f"no thread {args['id']}")
    text = framed(rows, door.agent, "thread")
    return {"ok": True, "messages": without_bodies(rows), "text": text}, text


_RUN: dict[str, Callable[[Door, dict[str, Any]], Answer]] = {
    "send": lambda door, args: _sent(door, args, reply=False),
    "reply": lambda door, args: _sent(door, args, reply=True),
    "inbox": _inbox, "read": _read, "ack": _ack, "check": _check, "ask": _ask,
    "team": _team, "thread": _thread,
}  # fmt: skip


CODEX_TURN = "x-codex-turn-metadata"  # Codex's _meta on every tool call (0.171)


def subagent_refusal(meta: object, agent: str) -> str | None:
    """Why a call whose ``_meta`` says a subagent made it is refused (Codex names the thread's
    source: ``thread_source: "subagent"``, with ``parent_thread_id``), or None."""
    from agentmaild.hooks.guard import SUBAGENT_REASON

    turn = meta.get(CODEX_TURN) if isinstance(meta, dict) else None
    if isinstance(turn, dict) and (turn.get("thread_source") == "subagent"
                                   or turn.get("parent_thread_id")):  # fmt: skip
        return SUBAGENT_REASON.format(agent=agent)
    return None


def run_tool(door: Door, name: str, arguments: dict[str, Any] | None) -> Answer:
    """The answer of tool ``name``; an ``AgentmaildError`` (the CLI's words) when refused."""
    tool = BY_NAME.get(name)
    if tool is None:
        raise ValidationError(f"unknown tool {name[:64]!r}; tools: {', '.join(BY_NAME)}")
    args = checked_arguments(tool, arguments, door.agent)
    door.here()
    return _RUN[name](door, args)
