"""Gemini CLI's hook acks wait for the turn: mail printed by SessionStart/BeforeAgent is acked by
AfterAgent.

Why (measured with gemini 0.61 against the stand-in): a turn whose model call fails (HTTP 429 or
500) is not kept in the session. ``gemini --resume`` then sends neither that prompt nor the
context our hook added to it, and AfterAgent does not fire. Acked at print, as for Claude Code,
Codex and OpenCode (which keep a failed turn's message, so a resume carries the mail), that mail
would be read without any model having seen it. So for ``--vendor gemini`` the printed ids wait
in ``<store dir>/hooks/<agent>.pending`` (with the session id and the event that printed them)
and stay unread until AfterAgent acks them. After a failed turn the next prompt (or the resumed
session's SessionStart) prints them again. The BeforeAgent right after a SessionStart does not
print SessionStart's mail a second time: it is already in that turn's context.

Stdlib only, like the rest of the hook path.
"""

from __future__ import annotations

import json
import os

from agentmaild.hooks import state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from agentmaild.hooks.run import Hook

DEFERRING_VENDORS = frozenset({"gemini"})
_START = "SessionStart"


def defers(hook: Hook) -> bool:
    return hook.vendor in DEFERRING_VENDORS


def _path(hook: Hook) -> str:
    return state.marker_path(hook.db_path or "", hook.agent, "pending")


def _read(hook: Hook) -> tuple[str, list[str]]:
    """(the event that printed them, the ids) for this session; ("", []) when none."""
    try:
        with open(_path(hook), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return "", []
    if not isinstance(data, dict) or data.get("session") != hook.text("session_id"):
        return "", []
    ids = data.get("ids")
    origin = data.get("origin")
    if not isinstance(ids, list) or not isinstance(origin, str):
        return "", []
    return origin, [i for i in ids if isinstance(i, str)]


def skip_printed(hook: Hook, rows: Sequence[Any]) -> list[Any]:
    """``rows`` minus what this turn's context already holds (SessionStart's, for BeforeAgent)."""
    if not defers(hook) or hook.name != "UserPromptSubmit":
        return list(rows)
    origin, ids = _read(hook)
    held = set(ids) if origin == _START else set()
    return [row for row in rows if row["id"] not in held]


def hold(hook: Hook, printed: list[str]) -> None:
    """Remember ``printed`` (unacked) until AfterAgent; SessionStart's ids join BeforeAgent's."""
    origin, earlier = _read(hook)
    ids = list(printed)
    if hook.name == "UserPromptSubmit" and origin == _START:
        ids = [*earlier, *(i for i in printed if i not in earlier)]
    payload = {"session": hook.text("session_id"), "origin": hook.name or "", "ids": ids}
    fd = state._open_marker(_path(hook), os.O_TRUNC)
    try:
        os.write(fd, json.dumps(payload).encode())
    finally:
        os.close(fd)


def take_held(hook: Hook) -> list[str]:
    """The ids printed since the last AfterAgent, to ack now; the marker is removed."""
    if not defers(hook):
        return []
    _, ids = _read(hook)
    try:
        os.unlink(_path(hook))
    except OSError:
        pass
    return ids


def turn_began(hook: Hook) -> None:
    """A BeforeAgent that printed nothing new: SessionStart's mail now belongs to this turn (a
    failed turn leaves it for the next prompt to print again, as any other held mail)."""
    origin, earlier = _read(hook)
    if defers(hook) and hook.name == "UserPromptSubmit" and origin == _START:
        hold(hook, earlier)


def _held_path(hook: Hook) -> str:
    return state.marker_path(hook.db_path or "", hook.agent, "mid-turn-held")


def held_mid_turn(hook: Hook) -> list[tuple[str, float]]:
    """The mid-turn deliveries printed since the last AfterAgent: (delivery id, when it began)."""
    try:
        with open(_held_path(hook), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [(str(d[0]), float(d[1])) for d in data
            if isinstance(d, list) and len(d) == 2 and isinstance(d[0], str)
            and isinstance(d[1], (int, float))]  # fmt: skip


def hold_mid_turn(hook: Hook, delivery_id: str, began: float) -> None:
    """Remember a claimed mid-turn batch until AfterAgent (written before it is printed: a
    failure here rolls the claim back before anything reached the turn)."""
    held = [*held_mid_turn(hook), (delivery_id, began)]
    fd = state._open_marker(_held_path(hook), os.O_TRUNC)
    try:
        os.write(fd, json.dumps(held).encode())
    finally:
        os.close(fd)


def renew_mid_turn(hook: Hook, tx: Any) -> None:
    """In an AfterTool's write: the turn goes on, so the held batches' leases do too."""
    from agentmaild.store import midturn

    for delivery_id, _ in held_mid_turn(hook):
        midturn.mid_turn_renew(tx, delivery_id)


def settle_mid_turn(hook: Hook, *, took: bool) -> None:
    """In the caller's write: AfterAgent (``took``) acks the held mid-turn batches; BeforeAgent
    and SessionStart (the turn that printed them never reached AfterAgent) release them."""
    held = held_mid_turn(hook) if defers(hook) else []
    if not held:
        return
    from agentmaild.store import midturn

    tx = hook.store().claims()
    recorded = _transcript(hook) if took else None
    for delivery_id, began in held:
        if took and (recorded is None or f"(delivery {delivery_id})".encode() in recorded):
            midturn.mid_turn_ack(tx, hook.agent, delivery_id, began)
        else:
            midturn.mid_turn_release(tx, delivery_id)
    try:
        os.unlink(_held_path(hook))
    except OSError:
        pass


def _transcript(hook: Hook) -> bytes | None:
    """The main session's recorded conversation (AfterAgent's ``transcript_path``); None when
    there is none to read. Gemini CLI fires AfterTool for a subagent's tool calls too, with the
    main session's id, but records the subagent's chat in a file of its own: a batch printed
    into a subagent's tool result is not in this one, so it is released, not acked."""
    path = hook.text("transcript_path")
    if not path:
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None
