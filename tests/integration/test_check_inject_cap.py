"""`check --inject` (the hook-speed path) keeps its output under Claude Code's 10 000 characters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore


def _inject(db: Path) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentmaild",
            "check",
            "--inject",
            "--agent",
            "operator",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


def test_many_messages_are_cut_at_the_cap_and_the_rest_waits(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = SqliteMailStore(db)
    mailer = Mailer(store)
    for i in range(100):
        mailer.send(sender="lead", to="operator", subject=f"note {i}", body="x" * 20)

    seen: list[str] = []
    while True:
        out = _inject(db)
        if not out:
            break
        assert len(out) < 10_000
        seen += [
            line.split(": ", 1)[1].rstrip(" -")
            for line in out.splitlines()
            if line.startswith("--- message ")
        ]
    assert len(seen) == 100
    assert len(set(seen)) == 100
    assert store.inbox("operator", unread_only=True) == []
    store.close()


def test_one_huge_message_is_cut_with_a_pointer_to_read(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = SqliteMailStore(db)
    sent = Mailer(store).send(sender="lead", to="operator", subject="big", body="y" * 60_000)
    out = _inject(db)
    assert len(out) < 10_000
    assert f"agentmaild read {sent.ids[0]}" in out
    assert store.inbox("operator", unread_only=True) == []
    store.close()
