"""A message too large for the hook's size limit is cut without breaking its frame: the body's
closing delimiter and the batch's end line are always there (or no body is shown at all)."""

from __future__ import annotations

import json
import re

import pytest

from agentmaild.render import inject


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "id": "msg_big", "from_agent": "lead", "subject": "s", "body": "b",
        "type": "dispatch", "priority": "normal", "thread_id": None, "payload": None,
        "created_at": "2026-12-04T00:00:00Z",
    }
    row.update(over)
    return row


def _frames(text: str) -> tuple[list[str], list[str]]:
    return re.findall(r"<<<body (\w+)", text), re.findall(r">>>body (\w+)", text)


@pytest.mark.parametrize("wrap", [inject.plain, inject.post_tool_use_json])
def test_a_huge_payload_leaves_the_payload_out_not_the_closing_delimiter(wrap) -> None:
    payload = json.dumps({"task": "x" * 15000})
    text, ids = inject.fit_rows(
        [_row(payload=payload, body="the body\nsecond line")], "worker", 1, [], wrap, 10000
    )
    assert ids == ["msg_big"]
    assert inject.js_len(text) < 10000
    shown = text
    if wrap is not inject.plain:
        shown = json.loads(text)["hookSpecificOutput"]["additionalContext"]
    opened, closed = _frames(shown)
    assert opened and opened == closed
    assert "second line" in shown
    assert "end of 1 message" in shown
    assert "agentmaild read msg_big" in shown
    assert "x" * 200 not in shown


def test_a_limit_too_small_for_any_frame_shows_no_half_frame() -> None:
    text, ids = inject.fit_rows([_row(body="y" * 5000)], "worker", 1, [], inject.plain, 700)
    assert ids == ["msg_big"]
    assert inject.js_len(text) < 700
    opened, closed = _frames(text)
    assert opened == closed  # both there, or neither
    assert "agentmaild read msg_big" in text
