"""The operator's parts on a real SQLite store through the dashboard's own reader: Needs you from
its SOURCES (oldest first; an answered question leaves it), the team picture's edges and marks
with every label escaped, the log tail bounded and made visible."""

from __future__ import annotations

import json
import time
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.kinds import open_reader
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.web import graph, needs
from agentmaild.web.logtail import TAIL_BYTES, read_tail


def _store(tmp_path: Path) -> SqliteMailStore:
    store = SqliteMailStore(tmp_path / "mail.db")
    store.add_agent(Agent(name="lead", capability="lead"))
    store.add_agent(Agent(name="worker", capability="builder", parent="lead"))
    return store


def test_needs_you_lists_each_source_oldest_first_and_an_answer_clears_a_question(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    mailer = Mailer(store)
    first = mailer.send(sender="worker", to="operator", subject="q1", body="?", type="question")
    time.sleep(0.01)  # created_at has millisecond resolution: two stamps, one order
    second = mailer.send(sender="lead", to="operator", subject="q2", body="?", type="question")
    reader = open_reader(store)
    try:
        loops = {"worker": {"stuck": True, "busy_for_s": 9999.0, "in_flight_delivery": "dlv-x",
                            "busy_reason": "in a turn"}, "lead": {"stuck": False}}  # fmt: skip
        items = needs.collect(reader, loops)
        assert [i.kind for i in items] == ["stuck", "question", "question"]  # oldest first
        assert [i.ref for i in items[1:]] == [first.ids[0], second.ids[0]]
        assert needs.SOURCES[-1] is needs.over_budget and len(needs.SOURCES) == 6
        mailer.reply(first.ids[0], sender="operator", body="yes")
        left = needs.collect(reader, {})
        assert [(i.kind, i.ref) for i in left] == [("question", second.ids[0])]
    finally:
        reader.close()
        store.close()


def test_the_graph_counts_edges_marks_held_pairs_and_escapes_labels(tmp_path: Path) -> None:
    store = _store(tmp_path)
    mailer = Mailer(store)
    for n in range(3):
        mailer.send(sender="lead", to="worker", subject=f"s{n}", body="b")
    mailer.send(sender="worker", to="lead", subject="back", body="<script>x</script>")
    reader = open_reader(store)
    try:
        data = graph.read(reader)
    finally:
        reader.close()
        store.close()
    edges = {(e["from_agent"], e["to_agent"]): int(e["n"]) for e in data["edges"]}
    assert edges == {("lead", "worker"): 3, ("worker", "lead"): 1}
    svg = str(graph.svg({**data, "held": {"lead|worker"}}))
    assert svg.count('class="edge looped"') == 2 and 'data-n="3"' in svg
    assert '<line class="parent"' in svg and 'href="/agents/worker"' in svg
    assert "<script>" not in svg
    # A loose name (an Overstory registry's) with markup in it stays text.
    hostile = {"agents": [{"name": '<b onclick="x">', "parent": None}],
               "edges": [{"from_agent": '<b onclick="x">', "to_agent": "lead", "n": 1,
                          "dead": 1}], "held": set()}  # fmt: skip
    out = str(graph.svg(hostile))
    assert "<b " not in out and "&lt;b onclick=&#34;x&#34;&gt;" in out
    assert 'class="edge refused"' in out


def test_the_log_tail_is_bounded_and_control_characters_are_spelled_out(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    assert read_tail(log) == ([], False)
    log.write_bytes(b"x" * (3 * TAIL_BYTES) + b"\nfirst\n\x1b]52;c;aGk=\x07second <b>\n")
    lines, exists = read_tail(log)
    assert exists and lines == ["first", "\\x1b]52;c;aGk=\\x07second <b>"]
    assert json.dumps(lines)  # plain strings, ready for the autoescaping template
