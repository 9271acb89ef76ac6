"""The everyday commands routed around typer (``hot.argv`` → ``hot.everyday``): case by case,
the same exit code, output, errors and store as the typer command gives on a copy of the same
store, with no typer, click, structlog or asyncio loaded; and the shapes typer must read (help,
usage errors) still reach it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentmaild.hot import argv as fast
from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.stores import with_bob_and_ended_carol

TYPER = "import sys; sys.argv[0] = 'agentmaild'; from agentmaild.cli.app import run; run()"
FORBIDDEN = ("typer", "click", "structlog", "asyncio", "anyio", "rich", "pydantic")


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """bob, carol (ended); a message from bob to operator (its id in ``id.txt``) and one from
    lead to bob."""
    db = tmp_path / "template.db"
    store = with_bob_and_ended_carol(db)
    first = Mailer(store).send(sender="bob", to="operator", subject="Task 7", body="done?")
    Mailer(store).send(sender="lead", to="bob", subject="go", body="build \x1b[31mit")
    (tmp_path / "id.txt").write_text(first.ids[0])
    store.close()
    return db


CASES: dict[str, tuple[list[str], bytes | None]] = {
    "send": (["send", "--from", "lead", "--to", "bob", "-s", "hi", "-b", "x"], None),
    "send, json, stdin": (
        ["send", "--to", "bob", "--subject=hi", "-b", "-", "--json"],
        "hé\n".encode(),
    ),
    "send to a group": (["send", "--agent", "lead", "--to", "@builders", "-s", "all"], None),
    "send, a thread, a type, a priority": (
        ["send", "--to", "bob", "-s", "q", "-t", "question", "-p", "urgent", "--thread", "{id}"],
        None,
    ),
    "send, stdin not UTF-8": (["send", "--to", "bob", "-s", "in", "-b", "-", "--json"], b"\xff"),
    "send to an unknown agent": (["send", "--to", "zed", "-s", "hi"], None),
    "send to an ended agent, json": (["send", "--to", "carol", "-s", "hi", "--json"], None),
    "send, bad priority": (["send", "--to", "bob", "-s", "hi", "-p", "mega"], None),
    "send, bad sender": (["send", "--from", "no way", "--to", "bob", "-s", "hi"], None),
    "send, a control character in an error": (["send", "--to", "bo\x1bb", "-s", "hi"], None),
    "send, the root's --db": (["--db", "{db}", "send", "--to", "bob", "-s", "hi"], None),
    "send, the root's --json": (["--json", "send", "--to", "bob", "-s", "hi"], None),
    "reply": (["reply", "{id}", "-b", "yes"], None),
    "reply, json, a priority, stdin": (["reply", "-b", "-", "{id}", "-p", "high", "--json"], b"ok"),
    "reply to no message": (["reply", "msg-nothing00000", "-b", "x"], None),
    "reply to a malformed id": (["reply", "msg-../x", "-b", "x", "--json"], None),
    "inbox": (["inbox", "--agent", "bob"], None),
    "inbox, json, unread": (["inbox", "-a", "operator", "--unread", "--json"], None),
    "inbox of an unknown agent": (["inbox", "--agent", "zed"], None),
    "inbox, a bad name, json": (["--json", "inbox", "--agent", "no way"], None),
    "read": (["read", "{id}"], None),
    "read, json": (["read", "{id}", "--json"], None),
    "read no message": (["read", "msg-nothing00000"], None),
    "read a malformed id": (["read", "msg-../x"], None),
    "ack": (["ack", "{id}"], None),
    "ack, one unknown, json": (["ack", "{id}", "msg-nothing00000", "--json"], None),
    "ack a malformed id": (["ack", "bad id"], None),
    "check": (["check", "--agent", "bob"], None),
    "check, json": (["check", "--agent", "operator", "--json"], None),
    "check, the sender from the environment": (["check"], None),
    "check an unknown agent": (["check", "--agent", "zed"], None),
    "check --inject": (["check", "--inject", "--agent", "bob"], None),
    "check --inject, the root's --db and --json": (
        ["--db={db}", "--json", "check", "--inject", "-a", "bob"],
        None,
    ),
    "list": (["list"], None),
    "list, json, a limit": (["list", "--limit", "1", "--json"], None),
    "list, filters": (["list", "--to", "bob", "--unread", "--from", "lead", "-n", "5"], None),
    "thread": (["thread", "{id}"], None),
    "thread, json": (["thread", "{id}", "--json"], None),
    "no thread": (["thread", "msg-nothing00000"], None),
    "status": (["status"], None),
    "status, json": (["status", "--json"], None),
    "agents list": (["agents", "list"], None),
    "agents list, json": (["agents", "list", "--json"], None),
    "ctl ping, no daemon": (["ctl", "ping"], None),
    "ctl ping, no daemon, json": (["ctl", "ping", "--json"], None),
    "ctl, a bad argument": (["ctl", "pause", "agent"], None),
}


def _run(prefix: list[str], db: Path, argv: list[str], stdin: bytes | None) -> tuple[object, ...]:
    env = {**os.environ, "AGENTMAIL_AGENT": "lead", "AGENTMAIL_DB": str(db)}
    env.pop("AGENTMAIL_URL", None)
    p = subprocess.run([*prefix, *argv], input=stdin or b"", capture_output=True, env=env,
                       timeout=60)  # fmt: skip
    ids = re.compile(rb"(msg|bc|dlv)-[0-9a-z]+|\b[0-9a-f]{16}\b")  # ids, a framing's random key
    store = SqliteMailStore(db)
    rows = [(m.from_agent, m.to_agent, m.subject, m.body, m.type, m.priority, m.read)
            for m in store.list_messages()]  # fmt: skip
    store.close()
    out, err = (ids.sub(rb"ID", s.replace(str(db.parent).encode(), b"DIR"))
                for s in (p.stdout, p.stderr))  # fmt: skip
    return p.returncode, out, err, sorted(rows, key=str)


@pytest.mark.parametrize("case", sorted(CASES))
def test_it_answers_as_the_typer_command_does(template: Path, tmp_path: Path, case: str) -> None:
    argv, stdin = CASES[case]
    fast_db, slow_db = tmp_path / "fast" / "mail.db", tmp_path / "slow" / "mail.db"
    for db in (fast_db, slow_db):
        db.parent.mkdir()
        shutil.copy(template, db)
    message = (tmp_path / "id.txt").read_text()

    def line(db: Path) -> list[str]:
        return [a.replace("{id}", message).replace("{db}", str(db)) for a in argv]

    assert fast.read(line(fast_db)) is not None  # it takes the fast path
    got = _run([sys.executable, "-m", "agentmaild"], fast_db, line(fast_db), stdin)
    assert got == _run([sys.executable, "-c", TYPER], slow_db, line(slow_db), stdin)
    assert got[0] in (0, 1, 2) and (got[1] or got[2])  # it said something either way


def _loaded(argv: list[str], db: Path) -> set[str]:
    env = {**os.environ, "AGENTMAIL_DB": str(db)}
    env.pop("AGENTMAIL_URL", None)
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "agentmaild", *argv],
                       capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    return {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if "|" in line}


@pytest.mark.parametrize(
    "argv",
    [["send", "--to", "bob", "-s", "hi"], ["inbox", "--agent", "bob"], ["list"], ["status"],
     ["agents", "list"], ["ctl", "ping"], ["--db", "{db}", "thread", "msg-nothing00000"]],
    ids=" ".join,
)  # fmt: skip
def test_it_loads_no_cli_framework(template: Path, argv: list[str]) -> None:
    loaded = _loaded([a.replace("{db}", str(template)) for a in argv], template)
    assert "agentmaild.hot.everyday" in loaded
    assert not {m for m in loaded if m.split(".")[0] in FORBIDDEN}


@pytest.mark.parametrize(
    ("argv", "says"),
    [(["inbox", "--help"], "Usage: agentmaild inbox"), (["inbox"], "Missing option"),
     (["list", "--limit", "0"], "--limit"), (["--version"], "agentmaild ")],
)  # fmt: skip
def test_what_typer_answers_still_reaches_it(template: Path, argv: list[str], says: str) -> None:
    env = {**os.environ, "AGENTMAIL_DB": str(template)}
    p = subprocess.run([sys.executable, "-m", "agentmaild", *argv], capture_output=True,
                       text=True, env=env, timeout=60)  # fmt: skip
    assert says in p.stdout + p.stderr
    assert p.returncode == (0 if says.startswith(("Usage", "agentmaild")) else 2)
