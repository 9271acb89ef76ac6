"""JSON that reaches a running daemon from outside: control requests and an agent's stream-json.

A control request holding ``1e999``, a lone surrogate or 5 000 levels of nesting gets one
``protocol`` error reply and changes nothing. An agent whose ``result`` text holds a lone surrogate
(``"\\ud800"`` is valid JSON) used to crash the delivery loop when the failure reason was stored,
so the batch sat in flight forever; now it fails like any other attempt and becomes a dead letter.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent, Message
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import DaemonProc, add_spawn, assert_sound, wait_for
from tests.support.daemon import raw_exchange

pytestmark = pytest.mark.timeout(90)

BAD_REQUESTS = {
    "overflow": b'{"v": 1, "cmd": "pause", "args": {"agent": "bob", "until": 1e999}}\n',
    "nan": b'{"v": 1, "cmd": "pause", "args": {"agent": "bob", "until": NaN}}\n',
    "surrogate": b'{"v": 1, "cmd": "pause", "args": {"agent": "bob", "note": "\\ud800"}}\n',
    "digits": b'{"v": 1, "cmd": "pause", "args": {"agent": "bob", "n": ' + b"1" * 5000 + b"}}\n",
    "deep": b'{"v": 1, "cmd": "pause", "args": {"agent": "bob", "x": '
    + b"[" * 5000
    + b"]" * 5000
    + b"}}\n",
}


def test_control_requests_with_unstorable_json_get_a_protocol_error(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    store = SqliteMailStore(db)
    add_spawn(store, "bob", ("cat",))
    store.close()
    d = daemons()
    wait_for(lambda: "paused" in d.status_row("bob"), 20, "bob's delivery loop")
    for case, line in BAD_REQUESTS.items():
        reply = json.loads(raw_exchange(d.sock, line))
        assert reply["ok"] is False, (case, reply)
        assert reply["error"]["code"] == "protocol", (case, reply)
        assert d.status_row("bob")["paused"] is False, f"{case}: the request was acted on"
    assert d.ctl("ping")["pong"]
    assert d.stop() == 0
    assert_sound(db)


# Valid JSON whose result text is a lone surrogate: Python decodes it to an unencodable str.
SURROGATE_AGENT = (
    "import sys; sys.stdin.read(); "
    'print(\'{"type": "result", "is_error": true, "result": "bad \\\\ud800 news"}\', flush=True)'
)


def test_agent_result_with_a_lone_surrogate_fails_the_attempt_not_the_loop(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="lead", capability="lead"))
    add_spawn(
        store, "w1", (sys.executable, "-S", "-c", SURROGATE_AGENT), settings={"success": "result"}
    )
    Mailer(store).send(sender="lead", to="w1", subject="task", body="do it")
    store.close()
    d = daemons()

    def dead() -> bool:
        s = SqliteMailStore(db)
        try:
            return bool(s.dead_letters("w1"))
        finally:
            s.close()

    wait_for(dead, 30, "the batch to become a dead letter after max_attempts")
    assert not d.events("supervisor.loop_crashed"), d.tail()

    def reports() -> list[Message]:
        s = SqliteMailStore(db)
        try:
            return [m for m in s.inbox("lead") if m.type == "error"]
        finally:
            s.close()

    # The report is its own transaction, right after the one that made the dead letter.
    ndr = wait_for(reports, 20, "the non-delivery report")
    assert len(ndr) == 1 and "bad \\ud800 news" in ndr[0].body, ndr
    assert d.stop() == 0
    assert_sound(db)
