"""What each vendor's turn costs, read from the REAL CLIs' own events through one daemon: a Claude
Code agent (spawn, and long-lived on the stdin channel) and a Codex, a Gemini CLI and an OpenCode
agent (spawn presets), each against its loopback stand-in. Each turn's tokens (and the price, where
the CLI reports one) land in `deliveries --json` and in the per-agent figures. The long-lived
channels likewise: a Codex app-server, ``gemini --acp``, ``opencode acp`` and ``opencode serve``."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_mixed_team import _add
from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import claude_binary, claude_env, isolated_home
from tests.support.daemon import FAST, daemon_factory
from tests.support.vendor_env import VENDORS, vendor_binary
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.vendors, pytest.mark.claude, pytest.mark.timeout(180)]

BOUND = 90.0
AGENTS = {"cl": "claude", "cs": "claude", "cx": "codex", "gm": "gemini", "oc": "opencode"}
# The long-lived channels: agent -> (vendor, channel, the CLI's arguments).
LONG_LIVED = {
    "ca": ("codex", "codex-app", ["app-server"]),
    "ga": ("gemini", "acp", ["--acp", "--skip-trust"]),
    "oa": ("opencode", "acp", ["acp"]),
    "os": ("opencode", "opencode-server", ["serve"]),
}


def test_each_vendors_turn_records_its_tokens_and_price(tmp_path: Path) -> None:
    db = tmp_path / "store" / "mail.db"
    project = tmp_path / "proj"
    project.mkdir()
    with ExitStack() as stack:
        make = stack.enter_context(daemon_factory(db, tmp_path, defaults=FAST, text=True))
        daemon = make(start=False)
        api = stack.enter_context(AnthropicStub("noted"))
        home = isolated_home(tmp_path / "cl", project)
        _add(daemon, "cl", "builder", "claude", claude_binary(), project,
             claude_env(home, api.base_url))  # fmt: skip
        home = isolated_home(tmp_path / "cs", project)  # a long-lived Claude Code (stdin channel)
        added = daemon.cli(
            "agents", "add", "cs", "-c", "builder", "--channel", "stdin", "--preset", "claude",
            "--command", claude_binary(), "--cwd", str(project),
            "--setting", "env=" + json.dumps(claude_env(home, api.base_url)),
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        for name, vendor in AGENTS.items():
            if vendor == "claude":
                continue
            stand_in = stack.enter_context(VENDORS[vendor].api(f"{name} ok"))
            _, env = VENDORS[vendor].setup(tmp_path / name, stand_in)
            _add(daemon, name, "builder", vendor, vendor_binary(vendor), project, env)
        daemon.start()
        for name in AGENTS:
            sent = daemon.cli("send", "--to", name, "-s", "work", "--body", "do it", "--json")
            assert sent.returncode == 0, sent.stderr
        # A second turn of the long-lived Claude: its price is that turn's, not the session's.
        wait_for(lambda: _acked(daemon, "cs"), BOUND, "the long-lived Claude's first turn")
        sent = daemon.cli("send", "--to", "cs", "-s", "more", "--body", "again", "--json")
        assert sent.returncode == 0, sent.stderr

        def usage() -> dict[str, Any] | None:
            shown = json.loads(daemon.cli("deliveries", "--json").stdout)
            found = [a["agent"] for a in shown["attempts"] if a["usage"]]
            return shown if set(found) == set(AGENTS) and found.count("cs") == 2 else None

        shown = wait_for(usage, BOUND, "every vendor's turn with its usage")
        used = {a["agent"]: a["usage"] for a in shown["attempts"] if a["usage"]}  # newest first
        long_lived = [a["usage"] for a in shown["attempts"] if a["agent"] == "cs"]
        assert daemon.stop() == 0, daemon.tail()
    # What each stand-in answered with, as each CLI reports it: Claude Code its result's usage
    # and its own price; Codex turn.completed's usage; Gemini CLI the result's stats (its
    # requests summed); OpenCode step_finish's tokens and its price (0: an unpriced model).
    assert (used["cl"]["tokens_in"], used["cl"]["tokens_out"]) == (10, 5)
    assert used["cl"]["cost_usd"] is not None and used["cl"]["cost_usd"] > 0
    # The long-lived one: each turn's own tokens and price (the CLI's total_cost_usd grows).
    assert [(u["tokens_in"], u["tokens_out"]) for u in long_lived] == [(10, 5), (10, 5)]
    assert long_lived[0]["cost_usd"] == pytest.approx(long_lived[1]["cost_usd"])
    assert long_lived[1]["cost_usd"] == pytest.approx(used["cl"]["cost_usd"])
    assert (used["cx"]["tokens_in"], used["cx"]["tokens_out"], used["cx"]["cost_usd"]) == (
        10, 5, None)  # fmt: skip
    assert used["gm"]["tokens_in"] >= 10 and used["gm"]["tokens_out"] >= 5
    assert used["gm"]["cost_usd"] is None
    assert (used["oc"]["tokens_in"], used["oc"]["tokens_out"], used["oc"]["cost_usd"]) == (
        10, 5, 0.0)  # fmt: skip
    per_agent = {t["name"]: t for t in shown["cost"]["hour"]["agents"]}
    assert set(per_agent) == set(AGENTS) and per_agent["cl"]["cost_usd"] > 0
    assert per_agent["cx"]["cost_usd"] is None and per_agent["cx"]["turns"] == 1


def test_each_long_lived_channels_turn_records_its_tokens(tmp_path: Path) -> None:
    db = tmp_path / "store" / "mail.db"
    project = tmp_path / "proj"
    project.mkdir()
    with ExitStack() as stack:
        make = stack.enter_context(daemon_factory(db, tmp_path, defaults=FAST, text=True))
        daemon = make(start=False)
        for name, (vendor, channel, args) in LONG_LIVED.items():
            stand_in = stack.enter_context(VENDORS[vendor].api(f"{name} ok"))
            _, env = VENDORS[vendor].setup(tmp_path / name, stand_in)
            added = daemon.cli(
                "agents", "add", name, "-c", "builder", "--channel", channel,
                "--command", " ".join([vendor_binary(vendor), *args]), "--cwd", str(project),
                "--setting", "env=" + json.dumps(env),
            )  # fmt: skip
            assert added.returncode == 0, added.stderr
        daemon.start()
        for name in LONG_LIVED:
            sent = daemon.cli("send", "--to", name, "-s", "work", "--body", "do it", "--json")
            assert sent.returncode == 0, sent.stderr
        # A second turn of the app-server's thread: that turn's tokens, not the thread's total.
        wait_for(lambda: _acked(daemon, "ca"), BOUND, "the app-server's first turn")
        sent = daemon.cli("send", "--to", "ca", "-s", "more", "--body", "again", "--json")
        assert sent.returncode == 0, sent.stderr

        def usage() -> dict[str, Any] | None:
            shown = json.loads(daemon.cli("deliveries", "--json").stdout)
            found = [a["agent"] for a in shown["attempts"] if a["usage"]]
            return shown if set(found) == set(LONG_LIVED) and found.count("ca") == 2 else None

        shown = wait_for(usage, BOUND, "every long-lived channel's turn with its usage")
        assert daemon.stop() == 0, daemon.tail()
    used: dict[str, list[Any]] = {}
    for attempt in shown["attempts"]:
        used.setdefault(attempt["agent"], []).append(attempt["usage"])
    # Every stand-in answers 10 tokens in, 5 out. Codex app-server: thread/tokenUsage/updated
    # (no price); ACP: the prompt's answer (no price); opencode serve: step-finish parts with
    # OpenCode's price (0: an unpriced model).
    tokens = {name: [(u["tokens_in"], u["tokens_out"]) for u in got] for name, got in used.items()}
    assert tokens == {"ca": [(10, 5), (10, 5)], "ga": [(10, 5)], "oa": [(10, 5)], "os": [(10, 5)]}
    costs = {name: [u["cost_usd"] for u in got] for name, got in used.items()}
    assert costs == {"ca": [None, None], "ga": [None], "oa": [None], "os": [0.0]}


def _acked(daemon: Any, agent: str) -> bool:
    shown = json.loads(daemon.cli("deliveries", "--json", "--agent", agent).stdout)
    return any(a["outcome"] == "acked" for a in shown["attempts"])
