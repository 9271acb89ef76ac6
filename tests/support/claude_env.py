"""Run the real Claude Code CLI in a throw-away HOME against a loopback API stand-in.

binary = claude_binary()                      # installs the pinned CLI under .cache/ once
home = isolated_home(tmp_path, project_dir, API_KEY)
env = claude_env(home, stub.base_url)         # full env dict for subprocess / tmux
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "install-claude.sh"
CACHE_DIR = REPO / ".cache"

# A syntactically plausible key: the CLI only checks it client-side for the "approved" list
# (last 20 characters) and sends it as x-api-key to the stub.
TEST_API_KEY = "sk-ant-api03-agentmaild-test-" + "0" * 60 + "-stubkeyAA"

_binary: str | None = None


def claude_binary() -> str:
    """Path of the pinned ``claude`` executable, installing it first if needed.

    Honours ``AGENTMAILD_CLAUDE_BIN`` (use that binary as is). Serialised with a file lock so
    parallel pytest workers do not run npm at the same time.
    """
    global _binary
    if _binary is not None:
        return _binary
    override = os.environ.get("AGENTMAILD_CLAUDE_BIN")
    if override:
        _binary = override
        return _binary
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / ".install-claude.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    path = out.stdout.strip().splitlines()[-1]
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"install-claude.sh printed {path!r}, which is not executable")
    _binary = path
    return _binary


def isolated_home(
    tmp_path: Path,
    project_dir: Path | str,
    api_key: str = TEST_API_KEY,
    *,
    settings: dict[str, Any] | None = None,
    extra_config: dict[str, Any] | None = None,
) -> Path:
    """Create ``tmp_path/home`` with a ``.claude.json`` that skips every first-run dialog.

    Verified necessary for the TUI (2.1.332): ``hasCompletedOnboarding`` (else theme/login
    wizard), ``projects[dir].hasTrustDialogAccepted`` (else the trust dialog),
    ``customApiKeyResponses.approved`` (else "use this API key?"), and
    ``bypassPermissionsModeAccepted`` (else a warning dialog with --dangerously-skip-permissions).
    The other keys are harmless belt-and-braces. ``settings`` (if given) is written to
    ``~/.claude/settings.json``.
    """
    project = str(Path(project_dir).resolve())
    home = Path(tmp_path) / "home"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "numStartups": 1,
        "lastReleaseNotesSeen": "99.0.0",
        "lastOnboardingVersion": "99.0.0",
        "autoUpdates": False,
        "bypassPermissionsModeAccepted": True,
        "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
        "projects": {
            project: {
                "hasTrustDialogAccepted": True,
                "hasCompletedProjectOnboarding": True,
                "projectOnboardingSeenCount": 1,
                "allowedTools": [],
            }
        },
    }
    config.update(extra_config or {})
    (home / ".claude.json").write_text(json.dumps(config, indent=2))
    if settings is not None:
        (home / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
    return home


def claude_env(
    home: Path | str,
    base_url: str,
    api_key: str = TEST_API_KEY,
    *,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """Environment for a ``claude`` child: isolated HOME, the stub as API, no outside traffic.

    Inherited ``CLAUDECODE``/``CLAUDE_CODE_*``/``ANTHROPIC_*`` variables are dropped so a test run
    inside a Claude Code session does not leak the outer session's identity or credentials.
    """
    drop_prefixes = ("CLAUDE_CODE_", "ANTHROPIC_", "CLAUDE_CONFIG_DIR", "AGENTMAIL_", "TMUX")
    env = {
        k: v for k, v in os.environ.items() if k != "CLAUDECODE" and not k.startswith(drop_prefixes)
    }
    env.update(
        HOME=str(home),
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY=api_key,
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_BUG_COMMAND="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY="1",
        CLAUDE_CODE_DISABLE_TERMINAL_TITLE="1",
        # Fail fast against the stub instead of retrying with backoff for minutes.
        CLAUDE_CODE_MAX_RETRIES="0",
        API_TIMEOUT_MS="30000",
        TERM=os.environ.get("TERM", "xterm-256color")
        if os.environ.get("TERM") != "dumb"
        else "xterm-256color",
        LANG=os.environ.get("LANG", "C.UTF-8"),
    )
    if os.geteuid() == 0:
        # As root (CI, containers) the CLI refuses --dangerously-skip-permissions /
        # bypassPermissions and exits 1 unless it is told it runs in a sandbox.
        env["IS_SANDBOX"] = "1"
    env.update(extra or {})
    return env


# ---- stream-json (-p) helpers -------------------------------------------------------------------

STREAM_JSON_ARGS = [
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--replay-user-messages",
]


def user_line(text: str, line_uuid: str | None = None) -> str:
    """One stream-json user message line (with trailing newline), as the spawn/stdin channels
    write it. ``line_uuid`` becomes the message uuid (the delivery id)."""
    return (
        json.dumps(
            {
                "type": "user",
                "message": {"role": "user", "content": [{"type": "text", "text": text}]},
                "parent_tool_use_id": None,
                "uuid": line_uuid or str(uuid.uuid4()),
            }
        )
        + "\n"
    )


@dataclass
class PrintRun:
    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    elapsed: float

    def of_type(self, etype: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("type") == etype and (subtype is None or e.get("subtype") == subtype)
        ]

    @property
    def result(self) -> dict[str, Any]:
        results = self.of_type("result")
        assert results, f"no result event; events={[e.get('type') for e in self.events]}"
        return results[-1]


def run_print(
    binary: str,
    lines: list[str],
    *,
    env: dict[str, str],
    cwd: Path | str,
    extra_args: list[str] | None = None,
    timeout: float = 60,
) -> PrintRun:
    """Run ``claude -p`` in stream-json mode, feed ``lines``, close stdin, collect all events."""
    start = time.monotonic()
    proc = subprocess.run(
        [binary, *STREAM_JSON_ARGS, *(extra_args or [])],
        input="".join(lines),
        capture_output=True,
        text=True,
        env=env,
        cwd=str(cwd),
        timeout=timeout,
        start_new_session=True,
    )
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return PrintRun(proc.returncode, events, proc.stderr, time.monotonic() - start)


class StreamJsonProcess:
    """A long-lived ``claude -p --input-format stream-json`` child: write lines, read events.

    A reader thread parses stdout into a queue; :meth:`read_until` blocks on that queue with a
    deadline (no polling). Use as a context manager: exiting kills the process group.
    """

    def __init__(
        self,
        binary: str,
        *,
        env: dict[str, str],
        cwd: Path | str,
        extra_args: list[str] | None = None,
    ):
        self.proc = subprocess.Popen(
            [binary, *STREAM_JSON_ARGS, *(extra_args or [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(cwd),
            start_new_session=True,
            bufsize=1,
        )
        self.events: list[dict[str, Any]] = []
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                try:
                    event = json.loads(line)
                except ValueError:
                    event = {"type": "_unparsed", "line": line}
                self._queue.put(event)
        self._queue.put(None)  # EOF marker

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def write(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def read_until(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 30,
    ) -> list[dict[str, Any]]:
        """Consume events until one satisfies ``predicate``; return the events consumed
        (including the matching one). Raises TimeoutError / EOFError."""
        deadline = time.monotonic() + timeout
        consumed: list[dict[str, Any]] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no matching event within {timeout}s; got {[e.get('type') for e in consumed]}"
                    f"; stderr={self.stderr[-500:]!r}"
                )
            try:
                event = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if event is None:
                self._queue.put(None)
                raise EOFError(
                    f"stdout closed; got {[e.get('type') for e in consumed]}; "
                    f"stderr={self.stderr[-500:]!r}"
                )
            consumed.append(event)
            self.events.append(event)
            if predicate(event):
                return consumed

    def drain(self, timeout: float = 30) -> list[dict[str, Any]]:
        """Read until stdout closes; return the remaining events."""
        rest: list[dict[str, Any]] = []
        try:
            rest = self.read_until(lambda e: False, timeout)
        except EOFError:
            pass
        return rest

    def wait(self, timeout: float = 30) -> int:
        rc = self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=5)
        while True:  # keep events that arrived after the last read_until
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if event is not None:
                self.events.append(event)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)

    def __enter__(self) -> StreamJsonProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()


# ---- hooks --------------------------------------------------------------------------------------

HOOK_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "Notification",
    "SessionEnd",
)

_HOOK_RECORDER = """\
import json, os, sys, time
data = sys.stdin.read()
try:
    event = json.loads(data).get("hook_event_name", "unknown")
except ValueError:
    event = "unparsed"
name = "%s-%d-%d.json" % (event, time.time_ns(), os.getpid())
tmp = os.path.join(sys.argv[1], "." + name)
with open(tmp, "w") as f:
    f.write(data)
os.replace(tmp, os.path.join(sys.argv[1], name))
"""


def hook_recorder_settings(
    record_dir: Path, events: tuple[str, ...] = HOOK_EVENTS
) -> dict[str, Any]:
    """A settings.json ``hooks`` section whose command hooks store their stdin JSON, one file per
    invocation, in ``record_dir`` (read them back with :func:`hook_records`)."""
    record_dir.mkdir(parents=True, exist_ok=True)
    script = record_dir / "_record_hook.py"
    script.write_text(_HOOK_RECORDER)
    command = shlex.join([sys.executable, str(script), str(record_dir)])
    entry = [{"hooks": [{"type": "command", "command": command}]}]
    return {
        "hooks": {
            event: ([{"matcher": "*", **entry[0]}] if "ToolUse" in event else entry)
            for event in events
        }
    }


def hook_records(record_dir: Path, event: str | None = None) -> list[dict[str, Any]]:
    """Hook stdin payloads recorded so far, oldest first."""
    files = sorted(
        record_dir.glob(f"{event or '*'}-*.json"), key=lambda p: int(p.name.rsplit("-", 2)[1])
    )
    return [json.loads(p.read_text()) for p in files]


# ---- tmux ---------------------------------------------------------------------------------------

PROMPT_CHAR = "\u276f"  # the composer prompt glyph; the empty composer shows it + NBSP
COMPOSER_RE = re.compile(r"^\u2500{10,}\n\u276f[ \u00a0]*\n\u2500{10,}$", re.M)
BUSY_FOOTER = "esc to interrupt"


class TmuxServer:
    """A private tmux server (``tmux -L <unique>``), killed on exit."""

    def __init__(self, env: dict[str, str], name: str | None = None):
        self.name = name or f"agentmaild-test-{uuid.uuid4().hex[:10]}"
        self.env = {k: v for k, v in env.items() if not k.startswith("TMUX")}
        self.socket_path: str | None = None

    def run(
        self, *args: str, input: bytes | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["tmux", "-L", self.name, "-f", "/dev/null", *args],
            input=input,
            capture_output=True,
            env=self.env,
            check=check,
            timeout=10,
        )

    def new_session(
        self, session: str, argv: list[str], *, cwd: Path | str, width: int = 120, height: int = 40
    ) -> str:
        self.run(
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(cwd),
            shlex.join(argv),
        )
        if self.socket_path is None:
            out = self.run("display-message", "-p", "-t", session, "#{socket_path}").stdout
            self.socket_path = out.decode().strip() or None
        return f"{session}:0.0"

    def capture(self, target: str) -> str:
        return self.run("capture-pane", "-p", "-t", target).stdout.decode("utf-8", "replace")

    def pane_pid(self, target: str) -> int:
        return int(self.run("display-message", "-p", "-t", target, "#{pane_pid}").stdout)

    def paste(self, target: str, text: str, buffer: str | None = None) -> None:
        buf = buffer or f"amd-{uuid.uuid4().hex[:8]}"
        self.run("load-buffer", "-b", buf, "-", input=text.encode())
        self.run("paste-buffer", "-p", "-d", "-b", buf, "-t", target)

    def send_keys(self, target: str, *keys: str) -> None:
        self.run("send-keys", "-t", target, *keys)

    def kill(self) -> None:
        """Kill the server (its panes get SIGHUP) and remove the socket file it leaves behind."""
        self.run("kill-server", check=False)
        if self.socket_path:
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)

    def __enter__(self) -> TmuxServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def composer_idle(screen: str) -> bool:
    """The TUI shows an empty composer (the prompt glyph between two rules) and no busy footer."""
    return bool(COMPOSER_RE.search(screen)) and BUSY_FOOTER not in screen


def session_file(home: Path | str, pid: int) -> dict[str, Any] | None:
    """``$HOME/.claude/sessions/<pid>.json`` of a running interactive claude, if present."""
    path = Path(home) / ".claude" / "sessions" / f"{pid}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
