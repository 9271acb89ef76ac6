"""Run the real Codex, Gemini CLI and OpenCode CLIs in a throw-away HOME against loopback stand-ins.

binary = vendor_binary("codex")            # installs the pinned CLI under .cache/codex once
api = VENDORS["codex"].api("reply text")   # the matching stand-in (start it: ``with api:``)
home, env = VENDORS["codex"].setup(tmp_path, api)  # config files written, env for the child

Each set-up points the CLI at the stand-in, turns off its own retries (an API error reaches us at
once, except OpenCode, which retries 5xx/429 without end and has no switch for it) and its outside
traffic (update checks, usage statistics, model catalogues).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.gemini_stub import GeminiApi
from tests.support.loopback_api import LoopbackApi
from tests.support.openai_stub import ChatCompletionsApi, ResponsesApi

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "install-vendors.sh"
CACHE_DIR = REPO / ".cache"
API_KEY = "stand-in-key-0123456789"
CODEX_MODEL = "gpt-5"

_binaries: dict[str, str] = {}


def vendor_binary(vendor: str) -> str:
    """Path of the pinned ``vendor`` executable, installing it first if needed (file-locked, so
    parallel pytest workers never run npm at the same time). ``AGENTMAILD_<VENDOR>_BIN``
    overrides."""
    if vendor in _binaries:
        return _binaries[vendor]
    override = os.environ.get(f"AGENTMAILD_{vendor.upper()}_BIN")
    if override:
        _binaries[vendor] = override
        return override
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / ".install-vendors.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = subprocess.run(
            ["bash", str(INSTALL_SCRIPT), vendor],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    name, _, path = out.stdout.strip().splitlines()[-1].partition(" ")
    if name != vendor or not os.access(path, os.X_OK):
        raise RuntimeError(f"install-vendors.sh printed {out.stdout!r}")
    _binaries[vendor] = path
    return path


def _base_env(home: Path) -> dict[str, str]:
    """The test process's environment minus anything that could reach a real account."""
    drop = (
        "OPENAI_",
        "CODEX_",
        "GEMINI_",
        "GOOGLE_",
        "OPENCODE",
        "ANTHROPIC_",
        "AGENTMAIL",
        "XDG_",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(home), LANG=os.environ.get("LANG", "C.UTF-8"), NO_COLOR="1")
    # Set, not just dropped: a daemon's own XDG_* would otherwise reach the agent's child.
    for key, sub in (("CONFIG", ".config"), ("DATA", ".local/share"), ("CACHE", ".cache")):
        env[f"XDG_{key}_HOME"] = str(home / sub)
    env["XDG_STATE_HOME"] = str(home / ".local" / "state")
    return env


def _codex(tmp: Path, api: LoopbackApi) -> tuple[Path, dict[str, str]]:
    home = tmp / "home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "config.toml").write_text(
        f'model = "{CODEX_MODEL}"\n'
        'model_provider = "standin"\n'
        "check_for_update_on_startup = false\n"
        "[model_providers.standin]\n"
        'name = "standin"\n'
        f'base_url = "{api.base_url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "STANDIN_API_KEY"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    return home, {**_base_env(home), "STANDIN_API_KEY": API_KEY}


def _gemini(tmp: Path, api: LoopbackApi) -> tuple[Path, dict[str, str]]:
    home = tmp / "home"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        # sessionRetention: at start-up Gemini CLI deletes session files it judges not
        # resumable, and it judged a live session of a sibling gemini process (same HOME and
        # project) so: that session's next --resume failed ("Invalid session identifier").
        "general": {
            "maxAttempts": 1,
            "enableAutoUpdate": False,
            "sessionRetention": {"enabled": False},
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2))
    env = {**_base_env(home), "GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": api.base_url}
    return home, env


OPENCODE_QUIET = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
}


def _opencode(tmp: Path, api: LoopbackApi) -> tuple[Path, dict[str, str]]:
    home = tmp / "home"
    (home / ".config" / "opencode").mkdir(parents=True, exist_ok=True)
    model = {"stand-in-model": {"name": "stand-in-model"}}
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "standin",
        "options": {"baseURL": f"{api.base_url}/v1", "apiKey": API_KEY},
        "models": model,
    }
    config = {
        "model": "standin/stand-in-model",
        "small_model": "standin/stand-in-model",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "provider": {"standin": provider},
    }
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config, indent=2))
    return home, {**_base_env(home), **OPENCODE_QUIET}


@dataclass(frozen=True)
class Vendor:
    name: str
    api: Callable[..., LoopbackApi]
    setup: Callable[[Path, LoopbackApi], tuple[Path, dict[str, str]]]


VENDORS = {
    "codex": Vendor("codex", ResponsesApi, _codex),
    "gemini": Vendor("gemini", GeminiApi, _gemini),
    "opencode": Vendor("opencode", ChatCompletionsApi, _opencode),
}


def pids_with_env(key: str, value: str) -> list[int]:
    """Live processes whose environment has ``key=value`` (e.g. a test's private HOME)."""
    needle = f"{key}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X"):
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found
