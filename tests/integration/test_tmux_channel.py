"""TmuxChannel against a real tmux server (``-L <unique>``) running the stand-in TUI.

The stand-in (tests/agents/fake_tui.py) draws Claude Code's composer, takes bracketed paste,
runs the project's hooks (agentmaild's, installed with ``agentmaild hooks install``) and logs
every input event with the state it arrived in, so "never typed into a busy pane" is checked on
what the pane actually received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentmaild.channels.factory import make_channel
from agentmaild.channels.tmux import TmuxChannel, parse_screen, terminal_safe
from agentmaild.config import Config, TmuxConfig
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.ids import iso_now
from agentmaild.models import Agent, Batch, Message
from agentmaild.render.framing import render_batch
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.claude_env import TmuxServer
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.timeout(60),
]

FAKE_TUI = Path(__file__).resolve().parents[1] / "agents" / "fake_tui.py"
AGENTMAILD = Path(sys.executable).parent / "agentmaild"
AGENT = "pane-agent"


def jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def install_hooks(db: Path, project: Path) -> None:
    """agentmaild's own installer when it is there, else the settings it would write."""
    argv = [
        str(AGENTMAILD),
        "--db",
        str(db),
        "hooks",
        "install",
        "--agent",
        AGENT,
        "--dir",
        str(project),
    ]
    if AGENTMAILD.exists() and subprocess.run(argv, capture_output=True).returncode == 0:
        return
    try:  # the command is not wired in yet: its Python API
        from agentmaild.hooks.install import install_hooks as install

        install(project, AGENT, db, str(AGENTMAILD))
        return
    except ImportError:
        pass
    events = {
        "SessionStart": "session-start",
        "UserPromptSubmit": "user-prompt-submit",
        "Stop": "stop",
    }
    hooks = {
        event: [
            {
                "hooks": [
                    {
                        "type": "command",
                        "command": f"{AGENTMAILD} hook {name} --agent {AGENT} --db {db}",
                    }
                ]
            }
        ]
        for event, name in events.items()
    }
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / "settings.local.json").write_text(json.dumps({"hooks": hooks}))


@dataclass
class Pane:
    """One stand-in TUI in its own tmux server, plus the store its agent is registered in."""

    tmp: Path
    tmux: TmuxServer
    store: SqliteMailStore
    db: Path
    project: Path
    home: Path
    control: Path
    record: Path
    inputs: Path
    target: str = ""
    channels: list[TmuxChannel] = field(default_factory=list)

    def start(self, **env: str) -> None:
        full = dict(
            self.tmux.env,
            HOME=str(self.home),
            FAKE_TUI_RECORD=str(self.record),
            FAKE_TUI_INPUT_LOG=str(self.inputs),
            FAKE_TUI_CONTROL=str(self.control),
            **env,
        )
        self.tmux.env = full
        self.target = self.tmux.new_session(
            "agent", [sys.executable, str(FAKE_TUI)], cwd=self.project, width=100, height=30
        )
        self.wait_idle()

    def agent(self, **settings: Any) -> Agent:
        return self.store.update_agent(
            AGENT, {"tmux_target": self.target, "settings": {"home": str(self.home), **settings}}
        )

    def channel(self, settings: dict[str, Any] | None = None, **tmux: float) -> TmuxChannel:
        config = Config(tmux=TmuxConfig(**{"verify_timeout_s": 3.0, **tmux}))
        channel = TmuxChannel(self.agent(**(settings or {})), config, self.db)
        self.channels.append(channel)
        return channel

    def screen(self) -> str:
        return self.tmux.capture(self.target)

    def composer_text(self) -> str | None:
        composer = parse_screen(self.screen())
        return None if composer is None else composer.text

    def wait_idle(self) -> None:
        wait_for(
            lambda: self.composer_text() == "" and "esc to interrupt" not in self.screen(),
            what="idle composer",
        )

    def flag(self, name: str, on: bool = True) -> None:
        path = self.control / name
        if on:
            path.touch()
        else:
            path.unlink(missing_ok=True)

    def prompts(self, wait_for_n: int = 0) -> list[str]:
        """Submitted prompts; with ``wait_for_n``, once there are that many (the hook that
        verifies a submission runs before the TUI records it)."""
        if wait_for_n:
            wait_for(lambda: len(jsonl(self.record)) >= wait_for_n, what=f"{wait_for_n} prompts")
        return [r["prompt"] for r in jsonl(self.record)]

    def pastes(self) -> list[dict[str, Any]]:
        return [e for e in jsonl(self.inputs) if e["kind"] == "paste"]

    def seen(self, delivery_id: str) -> bool:
        row = self.store.connection.execute(
            "SELECT 1 FROM am_prompt_seen WHERE delivery_id = ?", (delivery_id,)
        ).fetchone()
        return row is not None

    def turn_state(self) -> str | None:
        agent = self.store.get_agent(AGENT)
        return agent.turn_state if agent else None


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    project = tmp_path / "proj"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    control = tmp_path / "control"
    control.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "AGENTMAIL"))}
    tmux = TmuxServer(env)
    store.add_agent(
        Agent(
            name=AGENT,
            capability="builder",
            channel="tmux",
            tmux_target="agent:0.0",
            tmux_socket=tmux.name,
        )
    )
    install_hooks(db, project)
    p = Pane(
        tmp_path,
        tmux,
        store,
        db,
        project,
        home,
        control,
        tmp_path / "record.jsonl",
        tmp_path / "inputs.jsonl",
    )
    try:
        yield p
    finally:
        tmux.kill()
        store.close()


def make_batch(body: str = "hello", *, subject: str = "greetings") -> tuple[Batch, str]:
    delivery_id = f"dlv-{uuid.uuid4().hex[:20]}"
    message = Message(
        id=f"msg-{uuid.uuid4().hex[:20]}",
        from_agent="lead",
        to_agent=AGENT,
        subject=subject,
        body=body,
        created_at=iso_now(),
    )
    batch = Batch(delivery_id=delivery_id, agent=AGENT, messages=(message,))
    return batch, render_batch(batch.messages, agent=AGENT, delivery_id=delivery_id)


async def wait_not_busy(channel: TmuxChannel) -> None:
    """Signals settle one by one (the Stop hook, then the session file, then the screen)."""
    for _ in range(200):
        if not await channel.is_busy():
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"still busy after 10s: {channel.describe()['signals']}")


# -- idle: paste, Enter, verify ---------------------------------------------------------------


async def test_idle_pane_gets_the_batch_and_the_hook_sees_it(pane: Pane) -> None:
    pane.start()
    channel = pane.channel()
    assert await channel.is_busy() is False
    batch, text = make_batch("line one\nline two")
    with anyio.fail_after(30):
        await channel.deliver(batch, text)
    # Whichever proof came first (the hook's record or the pane's busy footer; under load the
    # pane can win the race), the submission was verified, and the hook saw the delivery id.
    last = channel.describe()["last_submission"]
    assert last["delivery_id"] == batch.delivery_id  # type: ignore[index]
    assert last["verified_by"] in ("hook", "pane")  # type: ignore[index]
    wait_for(lambda: pane.seen(batch.delivery_id), what="the hook's record of the delivery id")
    assert pane.prompts(1) == [text.rstrip("\n")]
    assert len(pane.pastes()) == 1
    wait_for(lambda: pane.turn_state() == "idle", what="Stop hook: idle")


async def test_without_hooks_the_pane_verifies(pane: Pane) -> None:
    pane.start(FAKE_TUI_HOOKS="0")
    channel = pane.channel()
    batch, text = make_batch()
    with anyio.fail_after(30):
        await channel.deliver(batch, text)
    assert channel.describe()["last_submission"]["verified_by"] == "pane"  # type: ignore[index]
    assert pane.prompts(1) == [text.rstrip("\n")]


async def test_a_submitted_delivery_is_not_pasted_again(pane: Pane) -> None:
    pane.start()
    channel = pane.channel()
    batch, text = make_batch()
    await channel.deliver(batch, text)
    pane.wait_idle()
    redelivery = Batch(
        delivery_id=batch.delivery_id, agent=AGENT, messages=batch.messages, attempt=2
    )
    await channel.deliver(redelivery, text)
    assert len(pane.pastes()) == 1
    assert channel.describe()["last_submission"]["verified_by"] == "earlier"  # type: ignore[index]


# -- busy: never typed into --------------------------------------------------------------------


async def test_busy_pane_is_never_typed_into(pane: Pane) -> None:
    pane.start(FAKE_TUI_SESSION_FILE="1")
    pane.flag("hold")
    pane.tmux.paste(pane.target, "a human's own prompt")
    wait_for(lambda: pane.composer_text() == "a human's own prompt", what="human paste")
    pane.tmux.send_keys(pane.target, "Enter")
    wait_for(lambda: "esc to interrupt" in pane.screen(), what="busy footer")
    channel = pane.channel()
    assert await channel.is_busy() is True
    reasons = channel.describe()["signals"]["busy_reasons"]  # type: ignore[index]
    assert {"pane:busy-footer", "session:busy", "hook:busy"} <= set(reasons)

    batch, text = make_batch()
    with pytest.raises(AgentBusy, match="busy"):
        await channel.deliver(batch, text)  # forced past is_busy: still refused
    assert pane.prompts() == ["a human's own prompt"]
    assert [p["data"] for p in pane.pastes()] == ["a human's own prompt"]

    pane.flag("hold", on=False)
    await wait_not_busy(channel)
    assert pane.turn_state() == "idle"
    await channel.deliver(batch, text)
    assert pane.prompts(2) == ["a human's own prompt", text.rstrip("\n")]
    assert all(p["state"] == "idle" for p in pane.pastes())


async def test_open_dialog_is_busy_and_untouched(pane: Pane) -> None:
    pane.start()
    pane.flag("dialog")
    wait_for(lambda: "Do you want to proceed?" in pane.screen(), what="dialog")
    channel = pane.channel()
    assert await channel.is_busy() is True
    assert "pane:no-composer" in channel.describe()["signals"]["busy_reasons"]  # type: ignore[index]
    assert "pane:no-composer" in (channel.busy_reason() or "")
    batch, text = make_batch()
    with pytest.raises(AgentBusy, match="busy"):
        await channel.deliver(batch, text)
    assert pane.pastes() == []
    assert jsonl(pane.inputs) == []  # not even a key


@pytest.mark.parametrize("signal", ["composer-text", "copy-mode", "hook-busy", "session-busy"])
async def test_each_busy_signal_alone_makes_the_pane_busy(pane: Pane, signal: str) -> None:
    pane.start()
    channel = pane.channel()
    expected = {
        "composer-text": "pane:composer-not-empty",
        "copy-mode": "pane:in-mode",
        "hook-busy": "hook:busy",
        "session-busy": "session:busy",
    }[signal]
    if signal == "composer-text":
        pane.tmux.send_keys(pane.target, "-l", "half a sentence")
        wait_for(lambda: pane.composer_text() == "half a sentence", what="typed text")
    elif signal == "copy-mode":
        pane.tmux.run("copy-mode", "-t", pane.target)
    elif signal == "hook-busy":
        pane.store.update_agent(AGENT, {"turn_state": "busy"})
    else:
        pid = pane.tmux.pane_pid(pane.target)
        folder = pane.home / ".claude" / "sessions"
        folder.mkdir(parents=True)
        (folder / f"{pid}.json").write_text(json.dumps({"pid": pid, "status": "busy"}))
    assert await channel.is_busy() is True
    assert channel.describe()["signals"]["busy_reasons"] == [expected]  # type: ignore[index]
    assert channel.busy_reason() == expected


async def test_stale_or_superseded_hook_state_is_distrusted(pane: Pane) -> None:
    pane.start()
    pane.store.update_agent(AGENT, {"turn_state": "busy"})
    assert await pane.channel().is_busy() is True
    assert await pane.channel({"turn_state_stale_s": 0.0}).is_busy() is False
    # Claude says idle after the hook said busy (an Esc-interrupted turn fires no Stop hook).
    pid = pane.tmux.pane_pid(pane.target)
    folder = pane.home / ".claude" / "sessions"
    folder.mkdir(parents=True)
    later = int(time.time() * 1000) + 1000
    (folder / f"{pid}.json").write_text(
        json.dumps({"pid": pid, "status": "idle", "statusUpdatedAt": later})
    )
    assert await pane.channel().is_busy() is False


# -- failures ----------------------------------------------------------------------------------


async def test_unverifiable_submission_clears_the_composer(pane: Pane) -> None:
    pane.start(FAKE_TUI_HOOKS="0")
    pane.flag("ignore-enter")
    channel = pane.channel(verify_timeout_s=1.5, enter_retries=2)
    batch, text = make_batch()
    with anyio.fail_after(30), pytest.raises(DeliveryFailed, match="not verified"):
        await channel.deliver(batch, text)
    assert pane.composer_text() == ""
    assert pane.prompts() == []
    keys = [e["data"] for e in jsonl(pane.inputs) if e["kind"] == "key"]
    assert keys.count("\r") == 3  # first Enter + 2 retries
    assert keys[-1] == "\x1b"  # cleared with Escape (twice: "esc again to clear")
    pane.flag("ignore-enter", on=False)
    assert await channel.is_busy() is False  # the pane is usable again


async def test_vanished_pane_is_unavailable(pane: Pane) -> None:
    pane.start()
    channel = pane.channel()
    pane.tmux.run("kill-session", "-t", "agent")  # the last session: the server goes too
    assert await channel.is_busy() is False  # not busy: deliver() reports why
    batch, text = make_batch()
    with pytest.raises(AgentUnavailable, match="not found"):
        await channel.deliver(batch, text)
    assert "not found" in str(channel.describe()["unavailable"])


async def test_missing_target_on_a_live_server_is_unavailable(pane: Pane) -> None:
    pane.start()
    pane.store.update_agent(AGENT, {"tmux_target": "nosuch:0.0"})
    channel = TmuxChannel(pane.store.get_agent(AGENT), Config(), pane.db)  # type: ignore[arg-type]
    with pytest.raises(AgentUnavailable, match="not found"):
        await channel.deliver(*make_batch())


# -- serialisation and verbatim text -----------------------------------------------------------


async def test_two_deliveries_to_one_pane_are_serialised(pane: Pane) -> None:
    pane.start(FAKE_TUI_BUSY_S="0.05")
    first, second = pane.channel(), pane.channel()  # two instances share the pane's lock
    batches = [make_batch(f"body {i}\n" * 20) for i in range(2)]

    async def deliver(channel: TmuxChannel, batch: Batch, text: str) -> None:
        while True:  # what the delivery loop does: back off while the pane is busy
            try:
                await channel.deliver(batch, text)
                return
            except AgentBusy:
                await anyio.sleep(0.05)

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver, first, *batches[0])
            tg.start_soon(deliver, second, *batches[1])
    assert sorted(pane.prompts(2)) == sorted(text.rstrip("\n") for _, text in batches)
    assert len(pane.pastes()) == 2
    assert all(p["composer"] == "" for p in pane.pastes())  # each paste met an empty composer


async def test_hostile_text_arrives_verbatim(pane: Pane) -> None:
    marker = pane.tmp / "pwned"
    body = (
        f"C-c Enter Escape ; kill-server ; send-keys C-c\n$(touch {marker}) `touch {marker}`"
        "\n#{pane_pid} #(touch /tmp/x) ~ \\ 'single' \"double\" \ttab \u00a0nbsp \u276f glyph"
        "\n\u2500\u2500\u2500 not a rule \u2500\u2500\u2500 esc to interrupt"
        "\nend of paste:\x1b[201~\r\x03 still text"
    )
    pane.start()
    channel = pane.channel()
    batch, text = make_batch(body, subject="C-c; $(reboot)")
    await channel.deliver(batch, text)
    assert pane.prompts(1) == [terminal_safe(text).rstrip("\n")]
    assert "\\x1b[201~\n\\x03 still text" in pane.prompts()[0]
    assert not marker.exists()
    assert await pane.channel().is_busy() in (True, False)  # the server survived


def test_factory_routes_tmux() -> None:
    agent = Agent(
        name="a", capability="builder", channel="tmux", tmux_target="s:0.0", tmux_socket="sock"
    )
    channel = make_channel(agent, Config(), Path("/tmp/none.db"))
    assert isinstance(channel, TmuxChannel)
    assert channel.describe()["target"] == "s:0.0"


def test_composer_parsing_matches_claude_screens() -> None:
    rule = "\u2500" * 40
    idle = f"transcript\n{rule}\n\u276f\u00a0\n{rule}\n  ? for shortcuts"
    typed = f"x\n{rule}\n\u276f hello\n  world\n{rule}\n  footer \u00b7 esc to interrupt"
    assert parse_screen(idle).text == ""  # type: ignore[union-attr]
    composer = parse_screen(typed)
    assert composer is not None and composer.text == "hello\nworld"
    assert parse_screen("\u256d" + rule + "\u256e\n\u2502 \u276f 1. Yes\n\u2570" + rule) is None
