"""Interrupts with the REAL pinned vendor CLIs on their long-lived protocols, through a real
`agentmaild serve`, against the loopback API stand-ins: ``codex app-server`` (``turn/interrupt``),
``gemini --acp`` and ``opencode acp`` (``session/cancel``), ``opencode serve`` (the session's
abort). A turn held at the model is stopped
within seconds; the next turn, in the same session, opens with the interrupt's mail and carries
the interrupted batch again under its delivery id; both are acked once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.models import Agent
from tests.support.daemon import FAST, daemon_factory
from tests.support.vendor_env import vendor_binary
from tests.support.vendor_world import World, vendor_world
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(300)]

BOUND = 120.0  # a node CLI's initialize took ~20 s on a loaded machine
CASES = {  # protocol, vendor, its arguments, what the interrupt's answer says it did
    "codex-app": ("codex-app", "codex", ["app-server"], "turn/interrupt"),
    "acp-gemini": ("acp", "gemini", ["--acp", "--skip-trust"], "session/cancel"),
    "acp-opencode": ("acp", "opencode", ["acp"], "session/cancel"),
    "opencode-server": ("opencode-server", "opencode", ["serve"], "session abort"),
}


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[World, str, str]]:
    protocol, vendor, args, how = CASES[request.param]
    with vendor_world(vendor, tmp_path, [vendor_binary(vendor), *args]) as world:
        yield world, protocol, how


def test_interrupt_stops_the_turn_and_the_next_opens_with_it(
    case: tuple[World, str, str],
) -> None:
    world, protocol, how = case
    store = world.store
    store.add_agent(Agent(name="boss", capability="coordinator"))
    store.add_agent(Agent(name="carol", capability="builder", channel="stdin", parent="boss",
                          command=tuple(world.argv), cwd=str(world.project),
                          settings={"env": world.env, "protocol": protocol}))  # fmt: skip
    fast = {**FAST, "AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S": "5"}
    with daemon_factory(world.db, world.tmp, defaults=fast, text=True) as make:
        d = make()
        world.api.hold("LONGTASK")  # the model never answers: the turn would run for minutes
        sent = d.cli("send", "--from", "boss", "--to", "carol", "-s", "task", "-b", "LONGTASK")
        first = sent.stdout.strip()
        held = world.api.wait_for("LONGTASK", timeout=BOUND)
        dlv = wait_for(lambda: d.status_row("carol")["in_flight_delivery"], 10, "the delivery")
        asked = time.monotonic()
        done = d.cli("interrupt", "carol", "--from", "boss", "-r", "WRONGBRANCH", "--json",
                     timeout=90)  # fmt: skip
        stop_s = time.monotonic() - asked
        world.api.release()  # the stopped turn's call, answered to nobody
        answer = json.loads(done.stdout)
        assert done.returncode == 0 and answer["interrupted"] is True, (answer, d.tail())
        assert answer["detail"].startswith(how), answer  # the protocol's own stop did it
        assert stop_s < 15, stop_s
        session = store.get_agent("carol").session_id  # type: ignore[union-attr]
        nxt = world.api.wait_for(f"REDELIVERY (attempt 2) of delivery {dlv}", timeout=BOUND)
        assert nxt.seq > held.seq
        batch = nxt.last_user_text().split("[agentmail] REDELIVERY")[-1]
        assert batch.index(answer["id"]) < batch.index(first) and "WRONGBRANCH" in batch
        wait_for(lambda: world.all_read("carol"), BOUND, "the redelivery acked")
        assert store.get_agent("carol").session_id == session  # type: ignore[union-attr]
        outcomes = [(a.attempt, a.outcome) for a in reversed(store.list_attempts(agent="carol"))]
        assert outcomes == [(1, "interrupted"), (2, "acked")]
