"""Renders taken mail as injected context within an output cap (Claude Code's 10 000 characters).

Shared by the hooks and ``check --inject``; stdlib only (it runs on every prompt). What does not
fit stays unread for the next time and the output says how much waits.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    import types
    from collections.abc import Callable
    from typing import Any


def plain(text: str) -> str:
    return text


def post_tool_use_json(text: str) -> str:
    payload = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": text}}
    return json.dumps(payload, ensure_ascii=False) + "\n"


def stop_block_json(text: str) -> str:
    return json.dumps({"decision": "block", "reason": text}, ensure_ascii=False) + "\n"


def vendor_wrap(vendor: str, event: str) -> Callable[[str], str]:
    """Plain text for Claude Code and the OpenCode plugin; for Codex and Gemini CLI
    ``hookSpecificOutput.additionalContext`` JSON under the vendor's name of ``event`` (Gemini's
    BeforeAgent is our UserPromptSubmit, its AfterTool our PostToolUse)."""
    if vendor not in ("codex", "gemini"):
        return plain
    gemini = {"UserPromptSubmit": "BeforeAgent", "PostToolUse": "AfterTool"}
    name = gemini.get(event, event) if vendor == "gemini" else event

    def wrap(text: str) -> str:
        payload = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}
        return json.dumps(payload, ensure_ascii=False) + "\n"

    return wrap


def js_len(text: str) -> int:
    """Length as Claude Code (JavaScript) counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def fit_rows(
    rows: list[dict[str, Any]],
    agent: str,
    unread: int,
    nudges: list[dict[str, Any]],
    wrap: Callable[[str], str],
    limit: int,
    lead: str = "",
    delivery_id: str | None = None,
) -> tuple[str, list[str]]:
    """The longest prefix of ``rows`` whose wrapped rendering stays under ``limit``: (the text,
    the ids it shows). ``unread`` counts the agent's unread mail, ``nudges`` are the banners of
    these rows, ``lead`` a line put before everything (Overstory's pending-nudge banner),
    ``delivery_id`` the batch's id in its header (a mid-turn delivery's). The rows are what the
    store's port took (``store.ports.Port.take``)."""
    import types

    from agentmaild.render.framing import measure_message

    msgs = [types.SimpleNamespace(**r) for r in rows]
    ids = [m.id for m in msgs]
    body_limit = max(500, limit - 3000)
    used, cut = 600 + len(lead), 0
    for i, m in enumerate(msgs, 1):
        used += measure_message(m, i, len(msgs), body_limit=body_limit) + 1
        if cut and used >= limit:
            break
        cut += 1
    while True:
        out = wrap(_render(msgs[:cut], agent, nudges, body_limit, unread - cut, lead, delivery_id))
        if js_len(out) < limit:
            return out, ids[:cut]
        if cut == 1:
            return _cut_hard(msgs[0], agent, nudges, wrap, limit, lead, delivery_id), ids[:1]
        cut -= 1


def _render(
    msgs: list[types.SimpleNamespace],
    agent: str,
    nudges: list[dict[str, Any]],
    body_limit: int,
    waiting: int,
    lead: str = "",
    delivery_id: str | None = None,
) -> str:
    from agentmaild.render.framing import render_banner, render_batch

    taken = {m.id for m in msgs}
    banner = render_banner([n for n in nudges if n["message_id"] in taken])
    banner = "\n".join(b for b in (lead, banner) if b)
    text = render_batch(
        msgs, agent=agent, banner=banner, body_limit=body_limit, delivery_id=delivery_id
    )
    if waiting > 0:
        text += (
            f"[agentmail] {waiting} more unread message(s) wait; they follow later "
            f"(or run `agentmaild check --agent {agent}`).\n"
        )
    return text


def _cut_hard(
    m: types.SimpleNamespace,
    agent: str,
    nudges: list[dict[str, Any]],
    wrap: Callable[[str], str],
    limit: int,
    lead: str,
    delivery_id: str | None,
) -> str:
    """One message too long even with its body cut (a large payload): shown without its payload,
    else only named. Never a cut inside the frame, which would leave a body unclosed."""
    import types

    read = f"run `agentmaild read {m.id}`"
    slim = types.SimpleNamespace(**{**vars(m), "payload": None})
    left_out = f" its payload ({len(m.payload)} characters) was left out;" if m.payload else ""
    note = f"[agentmail] cut at the hook's size limit:{left_out} {read} for all of it.\n"
    out = wrap(_render([slim], agent, nudges, 500, 0, lead, delivery_id) + note)
    if js_len(out) < limit:
        return out
    return wrap(f"[agentmail] 1 new message for {agent}, too large to show here: {read}.\n")
