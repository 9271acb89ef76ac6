"""``agentmaild send`` and ``reply`` routed around typer (``agentmaild.hot.send``): the shapes
they take, the ones left to the typer command, and, case by case, the same exit code, output,
errors and rows as the typer command, with no typer, click, structlog or asyncio loaded."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentmaild.hot.send import parse_send
from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.stores import with_bob_and_ended_carol

TYPER = "import sys; sys.argv[0] = 'agentmaild'; from agentmaild.cli.app import run; run()"
FORBIDDEN = ("typer", "click", "structlog", "asyncio", "anyio", "rich")


@pytest.mark.parametrize(
    ("argv", "fields"),
    [
        (["--to", "bob", "-s", "hi"], {"to": "bob", "subject": "hi"}),
        (["--to=bob", "--subject=a=b", "-b", "-", "--json"],
         {"to": "bob", "subject": "a=b", "body": "-", "json": True}),
        (["--agent", "lead", "--to", "@builders", "-s", "x", "-t", "question", "-p", "high",
          "--thread", "msg-1", "--db", "/tmp/m.db"],
         {"sender": "lead", "to": "@builders", "subject": "x", "type": "question",
          "priority": "high", "thread": "msg-1", "db": "/tmp/m.db"}),
    ],
)  # fmt: skip
def test_the_shapes_it_takes(argv: list[str], fields: dict[str, object]) -> None:
    assert parse_send(argv) == fields


@pytest.mark.parametrize(
    "argv",
    [
        ["--to", "bob"],  # no subject: typer's usage error
        ["-s", "hi"],  # no recipient
        ["--to", "bob", "-s", "hi", "--help"],
        ["--to", "bob", "-s", "hi", "--payload", "{}"],
        ["--to", "bob", "-s", "hi", "--idempotency-key", "k"],
        ["--to", "bob", "-s", "hi", "--anycast"],
        ["--to", "bob", "-s", "hi", "--url", "http://x"],
        ["--to", "bob", "-s", "hi", "--to", "carol"],  # given twice
        ["--to", "bob", "-s", "hi", "--json", "--json"],
        ["--to", "bob", "-s", "--body"],  # a value that looks like an option
        ["--to", "bob", "-s", "hi", "-b"],  # no value
        ["--to", "bob", "-shi"],  # a short option glued to its value
        ["--to", "bob", "-s", "hi", "extra"],
    ],
)
def test_the_shapes_it_leaves_to_typer(argv: list[str]) -> None:
    assert parse_send(argv) is None


def test_a_remote_send_is_left_to_typer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTMAIL_URL", "http://127.0.0.1:1")
    assert parse_send(["--to", "bob", "-s", "hi"]) is None
    assert parse_send(["msg-1", "-b", "x"], "reply") is None


def test_the_reply_shapes() -> None:
    assert parse_send(["msg-1", "-b", "ok", "--json"], "reply") == {
        "id": "msg-1", "body": "ok", "json": True,
    }  # fmt: skip
    assert parse_send(["--agent=bob", "-b", "-", "msg-1", "-p", "high"], "reply") == {
        "sender": "bob", "body": "-", "id": "msg-1", "priority": "high",
    }  # fmt: skip
    for left in (["msg-1"], ["-b", "x"], ["msg-1", "msg-2", "-b", "x"],
                 ["msg-1", "-b", "x", "--to", "bob"], ["msg-1", "-b", "x", "--payload", "{}"]):
        assert parse_send(left, "reply") is None


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """bob, carol (ended), and one message from bob (its id in ``replied.txt``)."""
    db = tmp_path / "template.db"
    store = with_bob_and_ended_carol(db)
    first = Mailer(store).send(sender="bob", to="operator", subject="Task 7", body="done?")
    (tmp_path / "replied.txt").write_text(first.ids[0])
    store.close()
    return db


CASES: dict[str, tuple[list[str], bytes | None]] = {
    "reply": (["reply", "{id}", "-b", "yes"], None),
    "reply, json, a priority, stdin": (["reply", "-b", "-", "{id}", "-p", "high", "--json"],
                                       b"ok\n"),
    "reply as the recipient": (["reply", "{id}", "--agent", "bob", "--body=again"], None),
    "reply to no message": (["reply", "msg-nothing00000", "-b", "x"], None),
    "reply to a malformed id": (["reply", "msg-../x", "-b", "x", "--json"], None),
    "plain": (["--from", "lead", "--to", "bob", "-s", "hi", "-b", "x"], None),
    "json": (["--from", "lead", "--to", "bob", "--subject=hi", "--json"], None),
    "a group": (["--agent", "lead", "--to", "@builders", "-s", "all", "-b", "y"], None),
    "a thread, a type, a priority": (
        ["--to", "bob", "-s", "q", "-t", "question", "-p", "urgent", "--thread", "msg-1"],
        None,
    ),
    "stdin": (["--to", "bob", "-s", "in", "-b", "-"], "héllo\n".encode()),
    "stdin not UTF-8": (["--to", "bob", "-s", "in", "-b", "-", "--json"], b"\xff"),
    "unknown recipient": (["--to", "zed", "-s", "hi"], None),
    "ended recipient, json": (["--to", "carol", "-s", "hi", "--json"], None),
    "empty subject": (["--to", "bob", "-s", ""], None),
    "bad priority": (["--to", "bob", "-s", "hi", "-p", "mega"], None),
    "bad sender": (["--from", "no way", "--to", "bob", "-s", "hi"], None),
    "bad thread": (["--to", "bob", "-s", "hi", "--thread", "x y"], None),
    "a control character in an error": (["--to", "bo\x1bb", "-s", "hi"], None),
}


def _run(prefix: list[str], db: Path, argv: list[str], stdin: bytes | None) -> tuple[object, ...]:
    env = {**os.environ, "AGENTMAIL_AGENT": "lead", "AGENTMAIL_DB": str(db)}
    env.pop("AGENTMAIL_URL", None)
    command = argv[0] if argv[0] == "reply" else "send"
    argv = argv[1:] if command == "reply" else argv
    p = subprocess.run([*prefix, command, *argv], input=stdin or b"", capture_output=True,
                       env=env, timeout=60)  # fmt: skip
    ids = re.compile(rb"(msg|bc)-[0-9a-z]+")
    store = SqliteMailStore(db)
    rows = [(m.from_agent, m.to_agent, m.subject, m.body, m.type, m.priority, m.thread_id)
            for m in store.list_messages()]  # fmt: skip
    store.close()
    return p.returncode, ids.sub(rb"ID", p.stdout), p.stderr, sorted(rows, key=str)


@pytest.mark.parametrize("case", sorted(CASES))
def test_it_answers_as_the_typer_command_does(template: Path, tmp_path: Path, case: str) -> None:
    argv, stdin = CASES[case]
    replied = (tmp_path / "replied.txt").read_text()
    argv = [replied if a == "{id}" else a for a in argv]
    fast, slow = tmp_path / "fast.db", tmp_path / "slow.db"
    shutil.copy(template, fast)
    shutil.copy(template, slow)
    is_reply = argv[0] == "reply"
    assert parse_send(argv[1:] if is_reply else argv, "reply" if is_reply else "send") is not None
    got = _run([sys.executable, "-m", "agentmaild"], fast, argv, stdin)
    assert got == _run([sys.executable, "-c", TYPER], slow, argv, stdin)
    assert got[0] in (0, 1, 2) and (got[1] or got[2])  # it said something either way


def test_it_loads_no_cli_framework(template: Path) -> None:
    env = {**os.environ, "AGENTMAIL_DB": str(template)}
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentmaild", "send", "--from", "lead",
         "--to", "bob", "-s", "hi"],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    loaded = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if "|" in line}
    assert "agentmaild.hot.send" in loaded and "agentmaild.mail.mailer" in loaded
    assert not {m for m in loaded if m.split(".")[0] in FORBIDDEN}


@pytest.mark.parametrize("spelling", [["--db", "{db}"], ["--db={db}"]])
def test_the_global_db_option_takes_the_same_path(template: Path, spelling: list[str]) -> None:
    """``agentmaild --db PATH send …`` is as quick as ``AGENTMAIL_DB=PATH agentmaild send …``."""
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTMAIL_DB", "AGENTMAIL_URL")}
    db = [a.replace("{db}", str(template)) for a in spelling]
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentmaild", *db, "send", "--from", "lead",
         "--to", "bob", "-s", "hi"],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    loaded = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if "|" in line}
    assert "agentmaild.hot.send" in loaded
    assert not {m for m in loaded if m.split(".")[0] in FORBIDDEN}
    store = SqliteMailStore(template)
    assert [m.subject for m in store.list_messages() if m.from_agent == "lead"] == ["hi"]
    store.close()
