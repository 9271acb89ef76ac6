"""The pinned agent CLIs with no credentials, offline, through the real spawn channel: each turn
fails, and the channel names the cause in words a person can act on (``channels.login``) — the
agent unavailable, "<vendor>: not logged in (no API key): <what to do>" — instead of a bare exit
code. Claude Code and Gemini CLI notice the missing key themselves; Codex too when its provider's
key variable is unset; a refused key (HTTP 401 from the loopback stand-in, as the real API
answers) is what Codex and OpenCode report otherwise."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from agentmaild.channels.factory import make_channel
from agentmaild.channels.login import login_reason
from agentmaild.config import Config, SpawnConfig
from agentmaild.errors import AgentUnavailable
from agentmaild.ids import iso_now, new_id
from agentmaild.models import Agent, Batch, Message
from agentmaild.render.framing import render_batch
from agentmaild.store.records import InsertRequest
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.claude_env import claude_binary
from tests.support.loopback_api import LoopbackApi
from tests.support.vendor_env import VENDORS, vendor_binary
from tests.support.vendor_world import vendor_world

pytestmark = [pytest.mark.vendors, pytest.mark.timeout(150)]

CONFIG = Config(spawn=SpawnConfig(stall_timeout_s=60.0, kill_grace_s=2.0))
REFUSAL = "Incorrect API key provided: stand-in. You can find your API key at the console."
# variant → (vendor, whether the stand-in refuses the key, the CLI's words the reason quotes)
CASES = {
    "claude-no-key": ("claude", False, "Not logged in"),
    "codex-no-key-variable": ("codex", False, "Missing environment variable: `STANDIN_API_KEY`"),
    "codex-key-refused": ("codex", True, "status 401 Unauthorized"),
    "gemini-no-key": ("gemini", False, "you must specify the GEMINI_API_KEY"),
    "gemini-no-auth-method": ("gemini", False, "Invalid auth method selected"),
    "opencode-key-refused": ("opencode", True, "Incorrect API key provided"),
}
FIX = {"claude": "set ANTHROPIC_API_KEY or run `claude /login`", "codex": "run `codex login`",
       "gemini": "set GEMINI_API_KEY", "opencode": "run `opencode auth login`"}  # fmt: skip
KEYS = ("ANTHROPIC_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "OPENCODE_API", "STANDIN_")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing of the test machine's credentials reaches a turn."""
    for key in list(os.environ):
        if key.startswith(KEYS):
            monkeypatch.delenv(key)


def _env(case: str, tmp: Path, api: LoopbackApi) -> dict[str, str]:
    vendor = CASES[case][0]
    if vendor == "claude":
        home = tmp / "home"
        home.mkdir()
        return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    home, env = VENDORS[vendor].setup(tmp, api)
    env.pop("STANDIN_API_KEY" if case == "codex-no-key-variable" else "", None)
    env.pop("GEMINI_API_KEY", None)
    if case == "gemini-no-auth-method":
        (home / ".gemini" / "settings.json").unlink()
    return env


def _one_batch(store: SqliteMailStore) -> tuple[Batch, str]:
    msg = Message(id=new_id("msg"), from_agent="bob", to_agent="alice", subject="hello",
                  body="Reply with one word.", created_at=iso_now())  # fmt: skip
    store.insert(InsertRequest(messages=(msg,), now=time.time()))
    batch = store.claim("alice", max_messages=10, max_chars=10_000, lease_s=300, now=time.time())
    assert batch is not None
    return batch, render_batch(batch.messages, agent="alice", delivery_id=batch.delivery_id)


async def _turn(tmp: Path, case: str, api: LoopbackApi) -> str:
    vendor = CASES[case][0]
    binary = claude_binary() if vendor == "claude" else vendor_binary(vendor)
    project = tmp / "proj"
    project.mkdir()
    db = tmp / "store" / "mail.db"
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="alice", capability="builder", channel="spawn", preset=vendor,
                              command=(binary,), cwd=str(project),
                              settings={"env": _env(case, tmp, api)}))  # fmt: skip
        batch, text = _one_batch(store)
        agent = store.get_agent("alice")
        assert agent is not None
        async with make_channel(agent, CONFIG, db) as channel:
            with anyio.fail_after(90), pytest.raises(AgentUnavailable) as raised:
                await channel.deliver(batch, text)
            assert channel.describe()["last_error"] == raised.value.message
        return raised.value.message
    finally:
        store.close()


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_cli_without_credentials_is_reported_as_not_logged_in(
    case: str, tmp_path: Path
) -> None:
    vendor, refuse, words = CASES[case]
    api = VENDORS["codex" if vendor == "claude" else vendor].api("never reached")
    with api:
        if refuse:
            api.fail_next(20, status=401, message=REFUSAL)
        reason = await _turn(tmp_path, case, api)
        if not refuse:
            assert not api.model_requests()  # the CLI stopped before any model call
    assert reason.startswith(f"{vendor}: not logged in (no API key): ")
    assert FIX[vendor] in reason
    assert f"(it said: {words}" in reason
    assert reason.endswith(("exit code 1", "exit code 41"))


@pytest.mark.parametrize(
    ("vendor", "argv", "words"),
    [("claude", ["-p", "hi"], "Not logged in · Please run /login"),
     ("gemini", ["-p", "hi"], "Please set an Auth method in your")],
)  # fmt: skip
def test_the_bare_cli_in_an_empty_home_says_so_too(
    vendor: str, argv: list[str], words: str, tmp_path: Path
) -> None:
    """Run by hand as a newcomer would (no preset, no settings): the same reason."""
    import subprocess

    binary = claude_binary() if vendor == "claude" else vendor_binary(vendor)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TERM": "dumb"}
    done = subprocess.run([binary, *argv], env=env, cwd=tmp_path, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=90, check=False)  # fmt: skip
    assert done.returncode in (1, 41), done.stdout + done.stderr
    reason = login_reason(vendor, done.stdout + done.stderr)
    assert reason is not None and f"(it said: {words}" in reason, done.stdout + done.stderr


def test_other_failures_are_not_taken_for_a_login() -> None:
    """The signs are the CLIs' own words: an ordinary failure keeps its plain reason."""
    assert login_reason("claude", "Error: ENOTFOUND api.anthropic.com") is None
    assert login_reason("gemini", "exit code 41") is None
    assert login_reason("opencode", "Error: model not found: standin/nothing") is None
    assert login_reason(None, "Not logged in · Please run /login") is None


async def test_a_long_lived_claude_on_stdin_without_credentials_says_so_too(tmp_path: Path) -> None:
    """The stdin channel's turn ends in a result with ``is_error``: the same reason."""
    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "store" / "mail.db"
    store = SqliteMailStore(db)
    try:
        env = {"HOME": str(home)}
        agent = store.add_agent(Agent(name="alice", capability="builder", channel="stdin",
                                      preset="claude", command=(claude_binary(),),
                                      cwd=str(tmp_path), settings={"env": env}))  # fmt: skip
        batch, text = _one_batch(store)
        async with make_channel(agent, CONFIG, db) as channel:
            with anyio.fail_after(90), pytest.raises(AgentUnavailable) as raised:
                await channel.deliver(batch, text)
    finally:
        store.close()
    reason = raised.value.message
    assert reason.startswith("claude: not logged in (no API key): set ANTHROPIC_API_KEY")
    assert "(it said: Not logged in" in reason


async def test_codex_app_server_with_its_key_refused_says_so_too(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The codex-app channel's turn error carries Codex's words: the same reason."""
    argv = [vendor_binary("codex"), "app-server"]
    with vendor_world("codex", tmp_path_factory.mktemp("codex-app-login"), argv) as world:
        world.register("alice", "codex-app")
        world.mail("alice", "body MARKER-L")
        batch, text = world.claim("alice")
        world.api.fail_next(20, status=401, message=REFUSAL)
        channel = world.channel("alice")
        async with channel:
            with anyio.fail_after(90), pytest.raises(AgentUnavailable) as raised:
                await channel.deliver(batch, text)
    reason = raised.value.message
    assert reason.startswith("codex: not logged in (no API key): set OPENAI_API_KEY"), reason
    assert "401 Unauthorized" in reason
