"""The dashboard's SSE producer on its own: one reader call per look, and updates coalesced (each
part at most once per ``LIVE_EVERY_S``) however often the store changes, the last one carrying the
final state; a fragment rendered in slices is the same HTML as one rendered at once."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio

from agentmaild.store.reader import Reader
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.web.dashboard import LIVE_EVERY_S, TICK_S, Dashboard

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
        store=SimpleNamespace(sync=SqliteMailStore(tmp_path / "mail.db")), db=tmp_path / "mail.db",
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
    # more; every part every 0.75 s (0, 0.75, … 3.75).
    assert LIVE_EVERY_S == 3 * TICK_S
    assert reader.looks == 6
    assert reader.reads == {"team": 6, "dead": 6, "timeline": 6}
    assert got == {"team": 6, "timeline:": 1, "dead": 1}  # unchanged HTML is not sent again
    assert not sub.dropped


async def test_a_sliced_render_is_the_same_html(tmp_path: Path) -> None:
    board = _board(tmp_path)
    team = [{**AGENT, "name": f"agent-{i}", "loop": None, "host": f"h{i % 3}"} for i in range(300)]
    sliced = await board.render_sliced("_team.html", team=team)
    assert sliced == board.render("_team.html", team=team)
    assert sliced.count('<td class="host">') == 300  # three hosts: the host column is shown
    one_host = [{**a, "host": None} for a in team]
    assert "<th>host</th>" not in board.render("_team.html", team=one_host)


class BurstReader(ChangingReader):
    """A store that took one delivery every ``every_s`` (by the producer's clock) until ``end``:
    the team row's unread count is how many there were by the time of the read."""

    def __init__(self, clock: list[float], start: float, end: float, every_s: float) -> None:
        super().__init__()
        self.clock, self.start, self.end, self.every_s = clock, start, end, every_s

    def count(self) -> int:
        t = min(self.clock[0], self.end)
        return 0 if t < self.start else int((t - self.start) / self.every_s) + 1

    def mark(self) -> object:
        return self.count()

    def team(self) -> list[dict[str, Any]]:
        self.reads["team"] += 1
        return [{**AGENT, "unread": self.count()}]


def _clocked(
    tmp_path: Path, start: float, end: float, every: float
) -> tuple[Dashboard, list[float], BurstReader, Any]:
    """A board on the test's clock (at 100.0), a BurstReader delivering from ``start`` to ``end``
    every ``every`` seconds, and a subscriber of the team view."""
    board = _board(tmp_path)
    now = [100.0]
    board.clock = lambda: now[0]
    reader = board.reader = BurstReader(now, start, end, every)
    return board, now, reader, board.hub.subscribe(frozenset({"team"}))


def _unread(html: str) -> int:
    return int(html.split('<td class="num unread">', 1)[1].split("<", 1)[0])


async def test_a_burst_is_coalesced_and_its_final_state_is_sent_within_the_interval(
    tmp_path: Path,
) -> None:
    start, end = 100.1, 103.0  # 3 s of deliveries, one every 10 ms: 291 changes
    board, now, reader, sub = _clocked(tmp_path, start, end, 0.01)
    pushes: list[tuple[float, int]] = []
    while now[0] < end + 2.0:  # what ``run`` does, on the test's clock
        await board.publish_once()
        while True:
            try:
                pushes.append((now[0], _unread(sub.receive.receive_nowait()[1])))
            except anyio.WouldBlock:
                break
        pause = board.pause()
        assert 0 < pause <= TICK_S
        now[0] += pause
    final = reader.count()
    assert final == 291
    during = [p for p in pushes if start <= p[0] <= end]
    # 3 s of changes: at most one update per 0.75 s (and the first one that opened the view).
    assert len(during) <= 3 / LIVE_EVERY_S + 1, pushes
    gaps = [b[0] - a[0] for a, b in pairwise(pushes)]
    assert min(gaps) >= LIVE_EVERY_S - 1e-9, gaps
    # Every update shows the state at the moment it was sent, and the final state is out no
    # later than one interval after the last change (the wake at the due time, not a tick late).
    expected = [(t, min(final, int((t - start) / 0.01) + 1)) for t, _ in pushes if t >= start]
    assert [p for p in pushes if p[0] >= start] == expected
    at, unread = pushes[-1]
    assert unread == final and at - end <= LIVE_EVERY_S + 1e-9, pushes
    assert reader.looks <= len(pushes) + 2 / TICK_S + 1  # polls the quiet store each tick only


async def test_the_first_change_after_a_quiet_spell_goes_out_on_the_next_tick(
    tmp_path: Path,
) -> None:
    board, now, reader, sub = _clocked(tmp_path, 105.0, 105.0, 1.0)  # one delivery, at 105.0
    sent_at = None
    while sent_at is None:
        await board.publish_once()
        try:
            _topic, html = sub.receive.receive_nowait()
            if _unread(html) == 1:
                sent_at = now[0]
        except anyio.WouldBlock:
            pass
        now[0] += board.pause()
    assert reader.count() == 1
    assert 105.0 <= sent_at <= 105.0 + TICK_S + 1e-9


class NeedsReader(ChangingReader):
    """Also answers Needs you's and the graph's queries (nothing waits), counting them."""

    def rows(self, name: str, **params: Any) -> list[dict[str, Any]]:
        self.reads[name] += 1
        return []


async def test_the_operator_parts_read_at_most_once_per_interval_while_the_store_churns(
    tmp_path: Path,
) -> None:
    board = _board(tmp_path)
    reader = board.reader = NeedsReader()
    now = [100.0]
    board.clock = lambda: now[0]
    sub = board.hub.subscribe(frozenset({"needs_n", "needs", "graph", "agent:a"}))
    got: Counter[str] = Counter()
    for _ in range(17):  # 4 s of ticks, the store changed before each
        await board.publish_once()
        now[0] += TICK_S
        while True:
            try:
                got[(sub.receive.receive_nowait())[0]] += 1
            except anyio.WouldBlock:
                break
    # Needs you is read once per 0.75 s for both its topics (the count and the list), the
    # graph and the agent block likewise; unchanged HTML is sent once.
    assert reader.reads["needs_questions"] == 6 and reader.reads["holds"] == 6 + 6
    assert reader.reads["graph_edges"] == 6 and reader.reads["agent"] == 6
    assert got == {"needs_n": 1, "needs": 1, "graph": 1}  # no agent "a": nothing to show
    assert not sub.dropped


async def test_the_header_count_alone_reads_needs_you_at_most_every_two_seconds(
    tmp_path: Path,
) -> None:
    board = _board(tmp_path)
    reader = board.reader = NeedsReader()
    now = [100.0]
    board.clock = lambda: now[0]
    sub = board.hub.subscribe(frozenset({"needs_n"}))  # every page's header, no Needs you page
    for _ in range(17):  # 4 s of ticks, the store changed before each
        await board.publish_once()
        now[0] += TICK_S
    assert reader.reads["needs_questions"] == 2  # at 0 and 2.25 s
    assert reader.looks == 6  # looked at every 0.75 s, as the other parts
    assert not sub.dropped
