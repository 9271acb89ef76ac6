"""The dashboard's SSE producer on its own: one reader call per tick, and updates coalesced (the
team at most twice a second, the timeline and dead letters at most once) however often the store
changes; a fragment rendered in slices is the same HTML as one rendered at once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio

from agentmaild.web.dashboard import TICK_S, Dashboard
from agentmaild.web.reader import Reader

AGENT = {"name": "a", "channel": "spawn", "state": "idle", "host": None, "turn_state": None,
         "unread": 0, "claimed": [], "dead": 0, "last": None}  # fmt: skip


class ChangingReader(Reader):
    """A store that changed before every look; counts calls and reads."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0
        self.reads: Counter[str] = Counter()

    def mark(self) -> object:
        return self.looks

    def tick(self, seen: dict[str, object]) -> tuple[object, dict[str, Any]]:
        self.looks += 1
        return super().tick(seen)

    def team(self) -> list[dict[str, Any]]:
        self.reads["team"] += 1
        return [{**AGENT, "unread": self.looks}]  # the HTML changes on every read

    def dead(self) -> list[dict[str, Any]]:
        self.reads["dead"] += 1
        return []

    def timeline(self, agent: str | None, limit: int = 60) -> dict[str, Any]:
        self.reads["timeline"] += 1
        return {"attempts": [], "in_flight": [], "sparks": {}}

    def close(self) -> None:
        pass


def _board(tmp_path: Path) -> Dashboard:
    daemon = SimpleNamespace(
        store=SimpleNamespace(sync=object()), db=tmp_path / "mail.db",
        config=SimpleNamespace(http=SimpleNamespace(require_tokens=False)),
        supervisor=SimpleNamespace(snapshot=dict),
    )  # fmt: skip
    return Dashboard(daemon, anyio.Event())  # type: ignore[arg-type]


async def test_one_reader_call_per_tick_and_updates_coalesced(tmp_path: Path) -> None:
    board = _board(tmp_path)
    reader = board.reader = ChangingReader()
    now = [100.0]
    board.clock = lambda: now[0]
    sub = board.hub.subscribe(frozenset({"team", "dead", "timeline:"}))
    ticks = 17  # 4 s of ticks
    got: Counter[str] = Counter()
    for _ in range(ticks):
        await board.publish_once()
        now[0] += TICK_S
        while True:  # the browser keeps up
            try:
                got[(sub.receive.receive_nowait())[0]] += 1
            except anyio.WouldBlock:
                break
    # One hop to the reader's thread per tick that has a part due (none between them), never
    # more; the team every 0.5 s (0, 0.5, … 4), the others every 1 s (0, 1, … 4).
    assert reader.looks == 9
    assert reader.reads == {"team": 9, "dead": 5, "timeline": 5}
    assert got == {"team": 9, "timeline:": 1, "dead": 1}  # unchanged HTML is not sent again
    assert not sub.dropped


async def test_a_sliced_render_is_the_same_html(tmp_path: Path) -> None:
    board = _board(tmp_path)
    team = [{**AGENT, "name": f"agent-{i}", "loop": None, "host": f"h{i % 3}"} for i in range(300)]
    sliced = await board.render_sliced("_team.html", team=team)
    assert sliced == board.render("_team.html", team=team)
    assert sliced.count('<td class="host">') == 300  # three hosts: the host column is shown
    one_host = [{**a, "host": None} for a in team]
    assert "<th>host</th>" not in board.render("_team.html", team=one_host)
