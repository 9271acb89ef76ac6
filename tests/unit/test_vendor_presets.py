"""The codex/gemini/opencode presets as data: argv per turn, environment scrub, the ack verdict
read from each CLI's events (shapes recorded from the pinned CLIs), Codex's lock holder."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest

from agentmaild.channels.vendors import PRESETS, TurnVerdict, flock_holder
from agentmaild.cli.agents_fields import PRESETS as CLI_PRESETS


def verdict_of(preset: str, events: list[dict[str, Any]]) -> TurnVerdict:
    verdict = TurnVerdict()
    for event in events:
        PRESETS[preset].judge(event, verdict)
    return verdict


def test_the_cli_offers_every_preset() -> None:
    assert set(CLI_PRESETS) == {"claude", *PRESETS}


@pytest.mark.parametrize(
    ("preset", "session", "resume", "argv"),
    [
        ("codex", None, False, ["x", "exec", "--json", "--skip-git-repo-check", "-c", "k=v", "-"]),
        (
            "codex",
            "T1",
            True,
            ["x", "exec", "resume", "--json", "--skip-git-repo-check", "-c", "k=v", "T1", "-"],
        ),
        (
            "gemini",
            "S1",
            False,
            ["x", "--output-format", "stream-json", "--skip-trust", "--session-id", "S1", "-c"],
        ),
        (
            "gemini",
            "S1",
            True,
            ["x", "--output-format", "stream-json", "--skip-trust", "--resume", "S1", "-c"],
        ),
        ("opencode", None, False, ["x", "run", "--format", "json", "-c"]),
        ("opencode", "ses_1", True, ["x", "run", "--format", "json", "--session", "ses_1", "-c"]),
    ],
)
def test_argv_per_turn(preset: str, session: str | None, resume: bool, argv: list[str]) -> None:
    extra = ("-c", "k=v") if preset == "codex" else ("-c",)
    assert PRESETS[preset].build_argv(("x", *extra), session, resume=resume) == argv


def test_argv_defaults_to_the_vendor_executable() -> None:
    assert PRESETS["opencode"].build_argv(None, None, resume=False)[0] == "opencode"


def test_scrub_drops_nesting_markers_keeps_keys_and_sets_defaults() -> None:
    env = {"OPENCODE": "1", "OPENCODE_CONFIG": "/c", "OPENAI_API_KEY": "k", "PATH": "/bin"}
    assert PRESETS["opencode"].scrub(env) == {
        "OPENCODE_CONFIG": "/c",
        "OPENAI_API_KEY": "k",
        "PATH": "/bin",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
    }
    gemini = PRESETS["gemini"].scrub(
        {"GEMINI_CLI": "1", "GEMINI_CLI_IDE_PORT": "9", "GEMINI_API_KEY": "k"}
    )
    assert gemini == {"GEMINI_API_KEY": "k"}
    codex = PRESETS["codex"].scrub({"CODEX_THREAD_ID": "t", "CODEX_HOME": "/h"})
    assert codex == {"CODEX_HOME": "/h"}


def test_codex_verdicts() -> None:
    ok = [
        {"type": "thread.started", "thread_id": "T"},
        {"type": "error", "message": "Reconnecting... 1/5"},
        {"type": "turn.completed", "usage": {}},
    ]
    assert verdict_of("codex", ok).success
    failed = [
        {"type": "turn.started"},
        {"type": "error", "message": "exceeded retry limit"},
        {"type": "turn.failed", "error": {"message": "exceeded retry limit, 429"}},
    ]
    verdict = verdict_of("codex", failed)
    assert not verdict.success and verdict.reason() == "exceeded retry limit, 429"
    assert not verdict_of("codex", [{"type": "turn.started"}]).success
    assert PRESETS["codex"].session_of(ok[0]) == "T"
    assert PRESETS["codex"].session_of(ok[2]) is None


def test_gemini_verdicts() -> None:
    answer = {"type": "message", "role": "assistant", "content": "hi", "delta": True}
    ok = verdict_of("gemini", [answer, {"type": "result", "status": "success"}])
    assert ok.success and ok.answered
    error = {"type": "result", "status": "error", "error": {"message": "[API Error: 429]"}}
    bad = verdict_of("gemini", [error])
    assert not bad.success and not bad.answered
    assert bad.reason() == "result status 'error': [API Error: 429]"
    assert PRESETS["gemini"].session_of({"type": "init", "session_id": "S"}) == "S"


def test_opencode_verdicts() -> None:
    def finish(reason: str) -> dict[str, Any]:
        return {"type": "step_finish", "sessionID": "ses", "part": {"reason": reason}}

    assert verdict_of("opencode", [finish("tool-calls"), finish("stop")]).success
    assert not verdict_of("opencode", [finish("stop"), finish("tool-calls")]).success
    error = {"type": "error", "error": {"name": "APIError", "data": {"message": "bad request"}}}
    bad = verdict_of("opencode", [error, finish("stop")])
    assert not bad.success and bad.reason() == "APIError: bad request"
    assert PRESETS["opencode"].session_of(finish("stop")) == "ses"


def test_flock_holder_reads_proc_locks_without_taking_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "thread.lock"
    path.write_text("")
    assert flock_holder(path) is None
    assert flock_holder(tmp_path / "missing.lock") is None
    with path.open() as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert flock_holder(path) == os.getpid()
    assert flock_holder(path) is None
