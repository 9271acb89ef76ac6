"""The CLI run twice, on the store file and through a live daemon's HTTP API, to compare."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.http_api import base_url, http_env, mint

ID_RE = re.compile(r"(?:msg|bc|dlv)-[a-z0-9]+")
KEY_RE = re.compile(r"\[agentmail\] key ([0-9a-f]{16}): ")


class Both:
    """Run one command on the store file and through the API; compare what they print."""

    def __init__(self, d: DaemonProc, token: str) -> None:
        self.d = d
        self.remote_env = {"AGENTMAIL_URL": base_url(d), "AGENTMAIL_TOKEN": token}

    def local(self, *args: str, env: dict[str, str] | None = None,
              stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        return self._run(args, {**self.d.env, **(env or {})}, stdin, db=True)

    def remote(self, *args: str, env: dict[str, str] | None = None,
               stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        # No --db, and a store path that does not exist: the file is never what answers.
        full = {**self.d.env, **self.remote_env, "AGENTMAIL_DB": "/nonexistent/mail.db",
                **(env or {})}  # fmt: skip
        return self._run(args, full, stdin, db=False)

    def _run(self, args: tuple[str, ...], env: dict[str, str], stdin: str | None,
             db: bool) -> subprocess.CompletedProcess[str]:  # fmt: skip
        argv = [sys.executable, "-m", "agentmaild", *args]
        if db:
            argv += ["--db", str(self.d.db)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, input=stdin,
                              timeout=60)  # fmt: skip

    def same(self, *args: str) -> subprocess.CompletedProcess[str]:
        here, there = self.local(*args), self.remote(*args)
        assert (there.returncode, there.stdout, there.stderr) == (
            here.returncode, here.stdout, here.stderr), args  # fmt: skip
        return here


def make_both(
    store: SqliteMailStore, daemons: Callable[..., DaemonProc], env: dict[str, str] | None = None
) -> Both:
    """alice and carol (pull builders) on a daemon serving the API; an operator token."""
    for name in ("alice", "carol"):
        store.add_agent(Agent(name=name, capability="builder", channel="pull"))
    d = daemons(http_env(env))
    return Both(d, mint(d, "operator"))


def normalised(text: str, agent: str) -> str:
    """Ids, framing keys and the agent's name replaced: two agents' equal histories print the
    same (each rendering of a batch draws its own key)."""
    for key in KEY_RE.findall(text):
        text = text.replace(key, "KEY")
    return ID_RE.sub("ID", text).replace(agent, "AGENT")


def stamps(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "T", text)
