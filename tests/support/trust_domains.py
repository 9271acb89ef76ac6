"""Two trust domains on loopback: two stores, two real daemons, A's key pinned by B.

A sends to ``peer:b/alice``; ``agentmaild relay`` (A's real CLI) signs each message and posts it to
B's ``/v1/relay``, which delivers it from ``peer:a/bob``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.trust import keyfile
from tests.support.daemon import FAST, DaemonProc, daemon_factory
from tests.support.http_api import base_url, http_env


@dataclass
class Domains:
    a: DaemonProc
    b: DaemonProc
    b_url: str
    a_key: keyfile.DomainKey

    def relay(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done: subprocess.CompletedProcess[str] = self.a.cli("relay", "--to", self.b_url, *args,
                                                              timeout=timeout)  # fmt: skip
        return done

    def b_mail(self) -> list[dict[str, object]]:
        done = self.b.cli("list", "--to", "alice", "--json")
        assert done.returncode == 0, done.stderr
        rows: list[dict[str, object]] = json.loads(done.stdout)["messages"]
        return rows

    def send_a(self, subject: str) -> str:
        done = self.a.cli("send", "--from", "bob", "--to", "peer:b/alice", "--subject", subject,
                          "--body", f"body of {subject}")  # fmt: skip
        assert done.returncode == 0, done.stderr
        return str(done.stdout).strip()

    def b_over_http(self, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        """The CLI against B's API, with no store file (no --db, and one that does not exist)."""
        return subprocess.run([sys.executable, "-m", "agentmaild", *args],
                              env={**self.b.env, **env}, capture_output=True, text=True,
                              timeout=60)  # fmt: skip

    def post(self, data: dict[str, object]) -> httpx.Response:
        return httpx.post(self.b_url + "/v1/relay", json=data, timeout=20)


@contextmanager
def two_domains(tmp_path: Path) -> Iterator[Domains]:
    """Domain ``a`` (agent bob) and domain ``b`` (agent alice, its HTTP API on), each with its
    key; B has pinned A."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    db_a, db_b = tmp_path / "a" / "mail.db", tmp_path / "b" / "mail.db"
    for db, agent in ((db_a, "bob"), (db_b, "alice")):
        s = SqliteMailStore(db)
        s.add_agent(Agent(name=agent, capability="builder", channel="pull"))
        s.close()
    with daemon_factory(db_a, tmp_path / "a", defaults=FAST, text=True) as make_a, \
         daemon_factory(db_b, tmp_path / "b", defaults=FAST, text=True) as make_b:  # fmt: skip
        a, b = make_a(), make_b(http_env())
        keys = {}
        for d, name in ((a, "a"), (b, "b")):
            done = d.cli("keys", "create", "--domain", name, "--json")
            assert done.returncode == 0, done.stderr
            keys[name] = json.loads(done.stdout)
        assert (tmp_path / "a" / "domain.key").stat().st_mode & 0o777 == 0o600
        added = b.cli("peers", "add", "a", "--public-key", keys["a"]["public_key"])
        assert added.returncode == 0, added.stderr
        yield Domains(a, b, base_url(b), keyfile.load(str(tmp_path / "a" / "domain.key")))
