"""The dashboard's parts on their own: the SSE hub drops a browser that stops reading (others
keep theirs), FTS queries are quoted, snippets and sparklines are escaped, templates autoescape."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from agentmaild.store.reader import snippet_parts
from agentmaild.store.reader_sqlite import Q, SearchIndex, fts_query
from agentmaild.web.hub import Hub, HubFull
from agentmaild.web.templating import make_env, spark


async def test_a_browser_that_stops_reading_is_dropped_and_the_others_keep_up() -> None:
    hub = Hub(queue_events=4)
    stuck = hub.subscribe(frozenset({"team"}))
    reader = hub.subscribe(frozenset({"team"}))
    other = hub.subscribe(frozenset({"dead"}))
    got: list[str] = []
    for i in range(10):
        hub.publish("team", f"v{i}")
        got.append((await reader.receive.receive())[1])  # this one keeps reading
    assert got == [f"v{i}" for i in range(10)]
    assert stuck.dropped and hub.dropped_total == 1 and hub.subscribers == 2
    drained = [stuck.receive.receive_nowait()[1] for _ in range(4)]
    assert drained == ["v0", "v1", "v2", "v3"]  # what it had queued, never more
    with pytest.raises(anyio.EndOfStream):
        await stuck.receive.receive()  # then its stream ends: the response finishes
    with pytest.raises(anyio.WouldBlock):
        other.receive.receive_nowait()  # no topic it asked for was published
    assert hub.latest["team"] == "v9"


async def test_the_hub_refuses_past_its_cap_and_wakes_the_producer() -> None:
    hub = Hub(max_subscribers=2)
    with anyio.fail_after(1), anyio.move_on_after(0.05) as idle:
        await hub.wait_wanted()
    assert idle.cancelled_caught  # nobody watches: the producer sleeps
    subs = [hub.subscribe(frozenset({"team"})) for _ in range(2)]
    with pytest.raises(HubFull):
        hub.subscribe(frozenset({"team"}))
    with anyio.fail_after(1):
        await hub.wait_wanted()
    for sub in subs:
        hub.unsubscribe(sub)
    assert hub.subscribers == 0 and hub.topics() == set()
    hub.close_all()


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("zeppelin", '"zeppelin"'),
        ('say "hi', '"say" AND "hi"'),
        ("a OR b NOT c*", '("a" OR "b") AND "NOT" AND "c*"'),
        ("canary -noon", '("canary") NOT "noon"'),
        ('"rollout starts" or deploy -x', '(("rollout starts" OR "deploy")) NOT "x"'),
        ("-noon", None),  # exclusions alone find nothing, on every store
        ("' OR 1=1 --", '"OR" AND "1=1"'),
        ('  ""  ', None),
        ("", None),
    ],
)
def test_search_terms_become_an_fts5_query(text: str, query: str | None) -> None:
    assert fts_query(text) == query


def test_search_over_a_temp_index_finds_new_mail_and_tolerates_fts_syntax(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    conn.execute("CREATE TABLE messages (id TEXT PRIMARY KEY, from_agent TEXT, to_agent TEXT, "
                 "subject TEXT, body TEXT, thread_id TEXT, created_at TEXT)")  # fmt: skip
    add = "INSERT INTO messages VALUES (?, 'bob', 'alice', ?, ?, NULL, '2026-01-01T00:00:00Z')"
    conn.execute(add, ("m1", "plan", "the <b>zeppelin</b> lands"))
    index = SearchIndex(Q, window=10)
    [hit] = index.search(conn, "zeppelin")
    assert hit["id"] == "m1" and ("zeppelin", True) in hit["snippet"]
    assert index.search(conn, 'NEAR( "unbalanced') == []  # no FTS syntax error reaches us
    conn.execute(add, ("m2", "later", "another zeppelin"))
    assert {h["id"] for h in index.search(conn, "zeppelin")} == {"m1", "m2"}  # rebuilt


def test_snippet_marks_split_into_text_pieces() -> None:
    assert snippet_parts("a \x01hit\x02 b \x01two\x02") == [
        ("a ", False), ("hit", True), (" b ", False), ("two", True)
    ]


def test_templates_escape_everything_and_the_sparkline_holds_only_numbers() -> None:
    env = make_env()
    out = env.from_string("{{ body }}|{{ r }}").render(body="<script>x</script>", r='"><img>')
    assert out == "&lt;script&gt;x&lt;/script&gt;|&#34;&gt;&lt;img&gt;"
    svg = str(spark([(0, None, 0)] * 58 + [(3, 0.2, 0), (1, 0.4, 1)]))
    assert svg.count("<rect") == 2 and 'class="bad"' in svg and "<polyline" in svg
    assert "4 attempts in the last hour" in svg
