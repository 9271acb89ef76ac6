"""The throw-away team of ``agentmaild demo``: a temporary directory with its own config, store
and daemon (HTTP on a free loopback port), three scripted agents, and the cleanup that leaves
nothing behind.

The process running the demo points its own environment at the team's config, so everything it
starts (the daemon, the agents, the ``dashboard`` command) and every store it opens see the team
and never the user's store or config.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentmaild.errors import AgentmaildError

ROLES = (("planner", "planner", None), ("coder", "coder", "planner"),
         ("reviewer", "reviewer", "planner"))  # fmt: skip
FOREIGN = ("AGENTMAIL_DB", "AGENTMAIL_AGENT", "AGENTMAIL_URL", "AGENTMAIL_TOKEN",
           "AGENTMAIL_DELIVERY")  # fmt: skip
START_TIMEOUT_S = 30.0
STOP_GRACE_S = 15.0


class DemoFailed(AgentmaildError):
    code = "demo"


@dataclass
class Team:
    dir: Path
    db: Path
    log: Path
    script: Path
    daemon: subprocess.Popen[bytes] | None = None
    url: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"ok": True, "url": self.url, "dir": str(self.dir), "db": str(self.db),
                "daemon_log": str(self.log), "daemon_pid": self.daemon.pid if self.daemon else None,
                "agents": [name for name, _, _ in ROLES],
                "agent_command": f"{sys.executable} {self.script} ROLE"}  # fmt: skip


def start() -> Team:
    """Make the directory, register the agents, start the daemon and learn the dashboard's URL;
    on any failure everything made so far is removed again."""
    root = Path(tempfile.mkdtemp(prefix="agentmaild-demo-")).resolve()
    team = Team(root, root / ".agentmail" / "mail.db", root / "daemon.log", root / "agent.py")
    try:
        _prepare(team)
        _start_daemon(team)
        team.url = _dashboard_url(team)
    except BaseException:
        stop(team)
        raise
    return team


def _prepare(team: Team) -> None:
    from agentmaild.cli import demo_agent
    from agentmaild.hot.access import store_at
    from agentmaild.models import Agent

    config = team.dir / "config.toml"
    config.write_text("# agentmaild demo: defaults only, the user's config stays out\n")
    for key in FOREIGN:
        os.environ.pop(key, None)
    os.environ["AGENTMAILD_CONFIG"] = str(config)
    shutil.copyfile(demo_agent.__file__, team.script)
    team.db.parent.mkdir(mode=0o700)
    with _quiet_stderr():
        store = store_at(str(team.db))
    try:
        for name, capability, parent in ROLES:
            command = (sys.executable, str(team.script), name)
            store.add_agent(Agent(name=name, capability=capability, parent=parent,
                                  channel="spawn", command=command, cwd=str(team.dir)))  # fmt: skip
    finally:
        store.close()


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The store's "created a new store" line: the demo says where its store is itself."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _start_daemon(team: Team) -> None:
    from agentmaild.control.client import request
    from agentmaild.control.protocol import socket_path_for
    from agentmaild.errors import DaemonNotAnswering, DaemonNotRunning

    argv = [sys.executable, "-m", "agentmaild", "serve", "--db", str(team.db),
            "--http", "127.0.0.1:0"]  # fmt: skip
    with team.log.open("ab") as log:
        team.daemon = subprocess.Popen(argv, cwd=team.dir, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=log, start_new_session=True)  # fmt: skip
    sock = socket_path_for(team.db)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if team.daemon.poll() is not None:
            raise DemoFailed(f"the demo's daemon exited ({team.daemon.returncode}): {_tail(team)}")
        try:
            if request(sock, "ping", None, 2.0).get("http"):
                return
        except (DaemonNotRunning, DaemonNotAnswering):
            pass
        time.sleep(0.1)
    raise DemoFailed(f"the demo's daemon did not answer in {START_TIMEOUT_S:g}s: {_tail(team)}")


def _tail(team: Team) -> str:
    lines = team.log.read_text(errors="replace").strip().splitlines() if team.log.exists() else []
    return lines[-1] if lines else "no output"


def _dashboard_url(team: Team) -> str:
    """The URL ``agentmaild dashboard`` prints for this store (with its dashboard token)."""
    import json

    argv = [sys.executable, "-m", "agentmaild", "--db", str(team.db), "dashboard", "--no-open",
            "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    try:
        return str(json.loads(done.stdout)["url"])
    except (ValueError, KeyError):
        said = done.stdout.strip() or done.stderr.strip()
        raise DemoFailed(f"no dashboard URL: {said}") from None


def stop(team: Team) -> list[str]:
    """Stop the daemon (it ends its agents' processes), make sure nothing of its process group
    is left, remove the directory. Returns what could not be cleaned (empty when all went)."""
    left: list[str] = []
    proc = team.daemon
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            left.append(f"the daemon (pid {proc.pid}) did not stop in {STOP_GRACE_S:g}s: killed")
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything of its session still running
        except ProcessLookupError:
            pass
        proc.wait()
    shutil.rmtree(team.dir, ignore_errors=True)
    if team.dir.exists():
        left.append(f"{team.dir} could not be removed")
    return left
