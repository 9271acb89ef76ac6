"""A domain key file other users could read is refused, not used silently (issue 33 item 13).

Whoever reads the key signs mail as this domain, so ``keys show``, ``relay`` and the daemon's
relay route all refuse a key file open to group or others (or owned by another uid) with one
clear line naming the fix, and work again once it is ``chmod 600``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmaild.trust import envelope
from agentmaild.trust.receive import wire
from tests.support.daemon import DaemonProc
from tests.support.trust_domains import Domains, two_domains

NOBODY = 65534


@pytest.fixture
def domains(tmp_path: Path) -> Iterator[Domains]:
    with two_domains(tmp_path) as d:
        yield d


def _one_error(done: object) -> str:
    stderr: str = done.stderr  # type: ignore[attr-defined]
    assert done.returncode == 1 and "Traceback" not in stderr, stderr  # type: ignore[attr-defined]
    [line] = stderr.splitlines()
    return line


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o600 | 0o002])
def test_keys_show_refuses_a_key_others_can_read(tmp_path: Path, mode: int) -> None:
    cli = DaemonProc(tmp_path / "mail.db", tmp_path, text=True)
    assert cli.cli("keys", "create", "--domain", "a").returncode == 0
    key = tmp_path / "domain.key"
    key.chmod(mode)
    line = _one_error(cli.cli("keys", "show"))
    assert line == (f"error: {key}: the domain key is open to other users (mode {mode:04o}); "
                    f"refusing to use it: run `chmod 600 {key}` (and make a new key if another "
                    "user may have read it)")  # fmt: skip
    as_json = cli.cli("keys", "show", "--json")
    assert json.loads(as_json.stdout)["error"]["code"] == "config"
    key.chmod(0o600)
    shown = cli.cli("keys", "show", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["domain"] == "a"


def test_a_key_owned_by_another_uid_is_refused(tmp_path: Path) -> None:
    cli = DaemonProc(tmp_path / "mail.db", tmp_path, text=True)
    assert cli.cli("keys", "create", "--domain", "a").returncode == 0
    key = tmp_path / "domain.key"
    os.chown(key, NOBODY, NOBODY)  # 0600 still, but someone else's file
    line = _one_error(cli.cli("keys", "show"))
    assert line.startswith(f"error: {key}: the domain key belongs to uid {NOBODY}, not to us")


def test_relay_and_the_daemon_refuse_an_open_key(domains: Domains, tmp_path: Path) -> None:
    a_key, b_key = tmp_path / "a" / "domain.key", tmp_path / "b" / "domain.key"
    sent = domains.send_a("signed with a private key only")
    a_key.chmod(0o644)
    line = _one_error(domains.relay("--once"))
    assert f"run `chmod 600 {a_key}`" in line and domains.b_mail() == []
    a_key.chmod(0o600)
    b_key.chmod(0o644)  # the receiver's key names the domain mail must be addressed to
    env = envelope.seal(from_agent="bob", to_agent="peer:b/alice", subject="hi", body="hello",
                        payload=None, created_at=time.time(), domain="a",
                        message_id="msg-abc1234567")  # fmt: skip
    r = domains.post(wire(env, envelope.sign(domains.a_key.key, env), domains.a_key.key_id,
                          "hello"))  # fmt: skip
    assert r.status_code == 403, r.text
    assert f"run `chmod 600 {b_key}`" in r.json()["error"]["message"]
    assert domains.b_mail() == []
    b_key.chmod(0o600)
    done = domains.relay("--once", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["relayed"] == [sent], done.stderr
    assert [m["subject"] for m in domains.b_mail()] == ["signed with a private key only"]
