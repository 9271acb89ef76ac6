"""The Codex, Gemini CLI and OpenCode presets: argv, environment and how to read a headless turn.

A ``VendorPreset`` is data plus three small readers; ``VendorSpawnChannel`` (``vendor_spawn``)
does the running. Each preset's headless turn takes the rendered batch on stdin and prints one
JSON event per line:

- codex: ``codex exec --json --skip-git-repo-check -``, later ``codex exec resume … <id> -``;
  the session id is ``thread.started.thread_id``; ack iff ``turn.completed`` and no
  ``turn.failed``.
- gemini: ``gemini --output-format stream-json --skip-trust --session-id <id>`` (an id we
  choose), later ``… --resume <id>``; ack iff ``result.status == "success"``.
- opencode: ``opencode run --format json``, later ``… --session <id>``; the session id is any
  event's ``sessionID``; ack iff the last ``step_finish`` has a stop reason and no ``error``.

All of them also need exit 0.
``agent.command`` may replace the executable (its first element) and append arguments (the rest,
e.g. Codex ``-c`` provider overrides), as for the Claude preset. ``--skip-trust``: registering an
agent with a working directory is the operator trusting it; a headless turn cannot ask.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentmaild.mail.jsoninput import storable

_REASON_MAX = 200
# (executable, extra arguments, session id or None for a CLI-chosen one, resume?) -> argv
ArgvBuilder = Callable[[str, list[str], str | None, bool], list[str]]
SessionReader = Callable[[dict[str, Any]], str | None]


@dataclass(slots=True)
class TurnVerdict:
    """What a turn's events said about success, filled event by event by the preset's reader."""

    success: bool = False
    failure: str = ""
    last_error: str = ""  # a non-final error event (Codex "Reconnecting…"), for the reason
    answered: bool = False  # the model's answer reached the session (it is worth resuming)

    def fail(self, detail: object) -> None:
        self.success = False
        self.failure = _short(detail)

    def note(self, detail: object) -> None:
        self.last_error = _short(detail)

    def reason(self) -> str:
        return self.failure or self.last_error or "no detail"


def _short(detail: object) -> str:
    return storable(str(detail or "no detail")[:_REASON_MAX])


VerdictReader = Callable[[dict[str, Any], TurnVerdict], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class VendorPreset:
    name: str
    executable: str
    argv: ArgvBuilder
    session_of: SessionReader
    judge: VerdictReader
    success_signal: str  # for error messages and `status`
    drop_env: tuple[str, ...] = ()  # inherited variables the vendor sets for the tools it runs
    drop_env_prefixes: tuple[str, ...] = ()
    default_env: Mapping[str, str] = field(default_factory=dict)  # unless already set
    # The CLI starts a session under an id we choose (so it is stored before the turn starts).
    chooses_id: bool = False
    # The exit code with which a resume says the session cannot be resumed (Gemini: a session
    # whose first turn failed is neither resumable nor re-creatable under its id).
    lost_session_exit: int | None = None

    def build_argv(
        self, command: tuple[str, ...] | None, session_id: str | None, *, resume: bool
    ) -> list[str]:
        command = command or (self.executable,)
        return self.argv(command[0], list(command[1:]), session_id, resume)

    def scrub(self, env: dict[str, str]) -> dict[str, str]:
        kept = {
            k: v
            for k, v in env.items()
            if k not in self.drop_env and not k.startswith(self.drop_env_prefixes)
        }
        return {**self.default_env, **kept}


# ---- Codex --------------------------------------------------------------------------------------


def _codex_argv(exe: str, extra: list[str], session_id: str | None, resume: bool) -> list[str]:
    flags = ["--json", "--skip-git-repo-check", *extra]
    if session_id is None or not resume:
        return [exe, "exec", *flags, "-"]
    return [exe, "exec", "resume", *flags, session_id, "-"]


def _codex_session(event: dict[str, Any]) -> str | None:
    thread = event.get("thread_id")
    return thread if event.get("type") == "thread.started" and isinstance(thread, str) else None


def _codex_judge(event: dict[str, Any], verdict: TurnVerdict) -> None:
    kind = event.get("type")
    if kind == "turn.completed" and not verdict.failure:
        verdict.success = True
    elif kind == "turn.failed":
        error = event.get("error")
        verdict.fail(error.get("message") if isinstance(error, dict) else error)
    elif kind == "error":  # also sent for a retry that may still succeed
        verdict.note(event.get("message"))


def codex_thread_holder(home: str | Path, session_id: str) -> int | None:
    """The pid holding Codex's writer lock on a thread (``thread-writer-locks/<id>.lock``, an
    flock), read from ``/proc/locks`` so that looking never takes the lock itself."""
    codex_home = os.environ.get("CODEX_HOME") or str(Path(home, ".codex"))
    return flock_holder(Path(codex_home, "thread-writer-locks", f"{session_id}.lock"))


def flock_holder(path: Path) -> int | None:
    try:
        inode = path.stat().st_ino
        table = Path("/proc/locks").read_text()
    except OSError:
        return None  # no lock file yet, or no /proc: nothing to say
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 26068 fe:00:2186967 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].endswith(f":{inode}"):
            pid = int(fields[4]) if fields[4].isdigit() else 0
            if pid > 0:
                return pid
    return None


# ---- Gemini CLI ---------------------------------------------------------------------------------


def _gemini_argv(exe: str, extra: list[str], session_id: str | None, resume: bool) -> list[str]:
    session = [] if session_id is None else ["--resume" if resume else "--session-id", session_id]
    return [exe, "--output-format", "stream-json", "--skip-trust", *session, *extra]


def _gemini_session(event: dict[str, Any]) -> str | None:
    sid = event.get("session_id")
    return sid if event.get("type") == "init" and isinstance(sid, str) else None


def _gemini_judge(event: dict[str, Any], verdict: TurnVerdict) -> None:
    if event.get("type") == "message" and event.get("role") == "assistant":
        verdict.answered = True
    if event.get("type") != "result":
        return
    if event.get("status") == "success":
        verdict.success, verdict.failure = True, ""
        return
    error = event.get("error")
    detail = error.get("message") if isinstance(error, dict) else None
    verdict.fail(f"result status {event.get('status')!r}: {detail or 'no detail'}")


# ---- OpenCode -----------------------------------------------------------------------------------

OPENCODE_STOP_REASONS = frozenset({"stop", "length"})


def _opencode_argv(exe: str, extra: list[str], session_id: str | None, resume: bool) -> list[str]:
    session = ["--session", session_id] if session_id is not None and resume else []
    return [exe, "run", "--format", "json", *session, *extra]


def _opencode_session(event: dict[str, Any]) -> str | None:
    sid = event.get("sessionID")
    return sid if isinstance(sid, str) and sid else None


def _opencode_judge(event: dict[str, Any], verdict: TurnVerdict) -> None:
    kind = event.get("type")
    if kind == "error":
        error = event.get("error")
        data = error.get("data") if isinstance(error, dict) else None
        message = data.get("message") if isinstance(data, dict) else None
        name = error.get("name") if isinstance(error, dict) else None
        verdict.fail(f"{name or 'error'}: {message or 'no detail'}")
    elif kind == "step_finish" and not verdict.failure:
        part = event.get("part")
        reason = part.get("reason") if isinstance(part, dict) else None
        # A step ending in tool calls is followed by another step; only a stop ends the turn.
        verdict.success = reason in OPENCODE_STOP_REASONS


PRESETS: dict[str, VendorPreset] = {
    "codex": VendorPreset(
        name="codex",
        executable="codex",
        argv=_codex_argv,
        session_of=_codex_session,
        judge=_codex_judge,
        success_signal="turn.completed",
        drop_env=("CODEX_THREAD_ID", "CODEX_SANDBOX", "CODEX_SANDBOX_NETWORK_DISABLED"),
    ),
    "gemini": VendorPreset(
        name="gemini",
        executable="gemini",
        argv=_gemini_argv,
        session_of=_gemini_session,
        judge=_gemini_judge,
        success_signal="result status success",
        drop_env=("GEMINI_CLI",),
        drop_env_prefixes=("GEMINI_CLI_IDE_",),
        chooses_id=True,
        lost_session_exit=42,
    ),
    "opencode": VendorPreset(
        name="opencode",
        executable="opencode",
        argv=_opencode_argv,
        session_of=_opencode_session,
        judge=_opencode_judge,
        success_signal="step_finish with a stop reason",
        drop_env=("OPENCODE", "OPENCODE_CLIENT"),
        # A daemon-run agent must not replace its own binary between turns.
        default_env={"OPENCODE_DISABLE_AUTOUPDATE": "1"},
    ),
}
