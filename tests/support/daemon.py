"""`agentmaild serve` as a real subprocess for the tests: start, ping, control, signals, its log."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentmaild.control.client import request
from agentmaild.control.protocol import socket_path_for
from agentmaild.errors import ControlError
from tests.support.waiting import wait_for

AGENTS = Path(__file__).resolve().parent.parent / "agents"
# Test-speed daemon settings: quick polls and backoffs, no jitter (timings stay predictable).
FAST = {
    "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.2",
    "AGENTMAILD_DAEMON_BACKOFF_INITIAL_S": "0.05",
    "AGENTMAILD_DAEMON_BACKOFF_MAX_S": "0.2",
    "AGENTMAILD_DAEMON_BACKOFF_JITTER": "0",
    "AGENTMAILD_DAEMON_SHUTDOWN_GRACE_S": "10",
}


def agent_cmd(script: str, *args: str) -> tuple[str, ...]:
    """argv running one of the stand-in agent CLIs in ``tests/agents``."""
    return (sys.executable, str(AGENTS / script), *args)


def base_env(
    tmp: Path, extra: dict[str, str] | None = None, defaults: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of a test daemon or CLI: no user config, JSON logs, test intervals."""
    env = {
        **os.environ,
        **(defaults or {}),
        **(extra or {}),
        "XDG_CONFIG_HOME": str(tmp / "xdg"),
        "AGENTMAILD_LOG_FORMAT": "json",
    }
    for key in ("AGENTMAIL_DB", "AGENTMAILD_CONFIG", "AGENTMAIL_AGENT"):
        if key not in (extra or {}):
            env.pop(key, None)
    return env


class DaemonProc:
    """One `agentmaild serve` subprocess; its JSON log is appended to ``<tmp>/daemon.log``."""

    def __init__(
        self,
        db: Path,
        tmp: Path,
        env: dict[str, str] | None = None,
        *,
        defaults: dict[str, str] | None = None,
        text: bool = False,
    ) -> None:
        self.db = db
        self.sock = socket_path_for(db)
        self.log = tmp / "daemon.log"
        self.env = base_env(tmp, env, defaults)
        self.text = text  # cli() output as str instead of bytes
        self.proc: subprocess.Popen[bytes] | None = None

    def cli(self, *args: str, stdin: bytes | None = None, timeout: float = 30) -> Any:
        """The real CLI against this daemon's store (a ``CompletedProcess``)."""
        return subprocess.run(
            [sys.executable, "-m", "agentmaild", *args, "--db", str(self.db)],
            env=self.env,
            capture_output=True,
            input=stdin.decode() if stdin is not None and self.text else stdin,
            text=self.text,
            timeout=timeout,
        )

    def start(self) -> DaemonProc:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agentmaild", "serve", "--db", str(self.db)],
                env=self.env,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        wait_for(self.ready, 20, "the daemon to answer ping")
        return self

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"daemon exited {self.proc.returncode}: {self.tail()}")
        try:
            return bool(request(self.sock, "ping", timeout=1.0)["pong"])
        except (ControlError, OSError):
            return False

    def ctl(self, cmd: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return request(self.sock, cmd, args, timeout=10.0)

    def status_row(self, agent: str) -> dict[str, Any]:
        rows: dict[str, dict[str, Any]] = {r["agent"]: r for r in self.ctl("status")["agents"]}
        return rows[agent]

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def events(self, name: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self.log.exists():
            return out
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == name:
                out.append(event)
        return out

    def tail(self, n: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@contextmanager
def daemon_factory(
    db: Path, tmp: Path, *, defaults: dict[str, str], text: bool = False
) -> Iterator[Callable[..., DaemonProc]]:
    """``make(env=None, start=True, path=None)``; every daemon left running is SIGKILLed after."""
    started: list[DaemonProc] = []

    def make(
        env: dict[str, str] | None = None, start: bool = True, path: Path | None = None
    ) -> DaemonProc:
        d = DaemonProc(path or db, tmp, env, defaults=defaults, text=text)
        started.append(d)
        return d.start() if start else d

    try:
        yield make
    finally:
        for d in started:
            if d.alive():
                d.kill()


def raw_exchange(sock: Path, payload: bytes, timeout: float = 15) -> bytes:
    """Send raw bytes on the control socket; everything the daemon answers before closing."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon may close before reading all of an oversized line
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return b"".join(chunks)
