"""One mixed team through one daemon, every agent a REAL CLI against its loopback stand-in: a Claude
Code lead and a Codex, a Gemini CLI and an OpenCode builder (spawn presets). The lead broadcasts to
``@builders``; each builder's model request carries its copy; each builder replies (the test runs
``agentmaild reply`` on its behalf); the lead's one session receives all three replies."""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from agentmaild.store.sqlite import SqliteMailStore
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import claude_binary, claude_env, isolated_home
from tests.support.daemon import FAST, DaemonProc, daemon_factory
from tests.support.loopback_api import LoopbackApi
from tests.support.vendor_env import VENDORS, vendor_binary
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.vendors, pytest.mark.claude, pytest.mark.timeout(180)]

BOUND = 90.0
BUILDERS = {"cx": "codex", "gm": "gemini", "oc": "opencode"}


def _add(daemon: DaemonProc, name: str, capability: str, preset: str, binary: str,
         cwd: Path, env: dict[str, str]) -> None:  # fmt: skip
    added = daemon.cli(
        "agents", "add", name, "-c", capability, "--channel", "spawn", "--preset", preset,
        "--command", binary, "--cwd", str(cwd), "--setting", "env=" + json.dumps(env),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr


def test_claude_lead_broadcasts_to_three_vendor_builders_and_gets_every_reply(
    tmp_path: Path,
) -> None:
    binaries = {vendor: vendor_binary(vendor) for vendor in BUILDERS.values()}
    claude = claude_binary()
    db = tmp_path / "store" / "mail.db"
    project = tmp_path / "proj"
    project.mkdir()
    with ExitStack() as stack:
        lead_api = stack.enter_context(AnthropicStub("noted"))
        apis: dict[str, LoopbackApi] = {}
        make = stack.enter_context(daemon_factory(db, tmp_path, defaults=FAST, text=True))
        daemon = make(start=False)
        lead_home = isolated_home(tmp_path / "lead", project)
        _add(daemon, "lead", "lead", "claude", claude, project,
             claude_env(lead_home, lead_api.base_url))  # fmt: skip
        for name, vendor in BUILDERS.items():
            api = stack.enter_context(VENDORS[vendor].api(f"{name} got it"))
            apis[name] = api
            _, env = VENDORS[vendor].setup(tmp_path / name, api)
            _add(daemon, name, "builder", vendor, binaries[vendor], project, env)
        daemon.start()
        started = time.monotonic()

        sent = daemon.cli(
            "send", "--from", "lead", "--to", "@builders", "-s", "plan",
            "--body", "build your part BROADCAST-1", "--json",
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        answer = json.loads(sent.stdout)
        copies = dict(zip(answer["recipients"], answer["ids"], strict=True))
        assert sorted(copies) == sorted(BUILDERS)

        replies: dict[str, str] = {}
        for name in BUILDERS:  # the daemons' turns run side by side; these waits overlap
            request = apis[name].wait_for("BROADCAST-1", timeout=BOUND)
            assert copies[name] in request.all_text()  # this builder's own copy
            replied = daemon.cli(
                "reply", copies[name], "--from", name, "--body", f"{name} done REPLY-{name}",
                "--json",
            )  # fmt: skip
            assert replied.returncode == 0, replied.stderr
            (replies[name],) = json.loads(replied.stdout)["ids"]

        for reply_id in replies.values():
            lead_api.wait_for(reply_id, timeout=BOUND)
        last = max(
            (r for r in lead_api.messages_requests() if "REPLY-" in r.last_user_text()),
            key=lambda r: r.seq,
        )
        # The lead's last turn holds every reply: all of them reached one (resumed) session.
        for name, reply_id in replies.items():
            assert reply_id in last.all_text(), name
        store = SqliteMailStore(db, readonly=True)
        try:
            wait_for(
                lambda: all(m.read for m in store.inbox("lead")) and len(store.inbox("lead")) == 3,
                BOUND, "the lead's three replies acked",
            )  # fmt: skip
            lead = store.get_agent("lead")
            assert lead is not None and lead.session_id

            def builders_done() -> bool:  # each turn ended: session stored, its copy acked
                agents = [store.get_agent(name) for name in BUILDERS]
                inboxes = [store.inbox(name) for name in BUILDERS]
                return all(a is not None and a.session_id for a in agents) and all(
                    len(box) == 1 and box[0].read for box in inboxes
                )

            wait_for(builders_done, BOUND, "every builder's turn done and acked")
        finally:
            store.close()
        assert time.monotonic() - started < BOUND
        assert daemon.stop() == 0, daemon.tail()
