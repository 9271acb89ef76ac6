"""What a tool answers: structured content (the CLI's ``--json`` rows, bodies left out) and a text
block in which every body stays inside the framing that marks it as another agent's words
(``render.framing``: delimiters keyed per answer, look-alike lines quoted). The structured content
of a tool that returns bodies carries that framed text too, as ``text``: Claude Code hands the
model the structured content alone when there is one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentmaild.render.framing import json_text, render_batch


@dataclass(frozen=True, slots=True)
class _Framed:
    """A message row (``Message.to_dict``, from the store or the API) as framing reads it."""

    id: str
    from_agent: str
    subject: str
    body: str
    type: str
    priority: str
    thread_id: str | None
    payload: str | None
    created_at: str

    @classmethod
    def of(cls, row: dict[str, Any]) -> _Framed:
        payload = row.get("payload")
        return cls(
            id=row["id"], from_agent=row["from"], subject=row["subject"], body=row.get("body", ""),
            type=row["type"], priority=row["priority"], thread_id=row.get("thread_id"),
            payload=None if payload is None else json.dumps(payload, separators=(",", ":")),
            created_at=row["created_at"],
        )  # fmt: skip


def framed(rows: list[dict[str, Any]], agent: str, title: str) -> str:
    """The rows' whole messages, each body between delimiters keyed for this answer."""
    return render_batch([_Framed.of(r) for r in rows], agent=agent, title=title)


def without_bodies(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "body"} for r in rows]


def as_text(data: object) -> str:
    return json_text(data)
