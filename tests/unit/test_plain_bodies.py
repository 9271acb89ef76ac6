"""The everyday commands' bodies without typer (``cli.plain``, ``reading``, ``sends``,
``daemon_ops``, ``agents_ops``): none of them loads typer, each takes its typer declaration's
parameters, and run through ``plain.call`` each prints, fails and exits exactly as the typer
command does on a copy of the same store."""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.stores import with_bob_and_ended_carol

BODIES = ("plain", "reading", "sends", "daemon_ops", "agents_ops", "status_view", "ctl_view")
# the typer command itself (the app's ``run``, not the console script's hot paths)
TYPER = "import sys; sys.argv[0] = 'agentmaild'; from agentmaild.cli.app import run; run()"
# a body through ``plain.call``: argv = module, function, kwargs (JSON), root options (JSON)
BODY = (
    "import importlib, json, sys\n"
    "from agentmaild.cli import plain\n"
    "module = importlib.import_module('agentmaild.cli.' + sys.argv[1])\n"
    "for key, value in json.loads(sys.argv[4]).items(): setattr(plain.STATE, key, value)\n"
    "code = plain.call(getattr(module, sys.argv[2]), json.loads(sys.argv[3]))\n"
    "sys.exit(99 if 'typer' in sys.modules else code)\n"
)
NOBODY = "msg-nothing00000"


@pytest.mark.parametrize("module", BODIES)
def test_a_body_module_loads_no_typer(module: str) -> None:
    code = f"import sys, agentmaild.cli.{module}; print('typer' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


DECLARED = [
    ("read", "inbox", "reading", "inbox"),
    ("read", "read_cmd", "reading", "read_cmd"),
    ("read", "ack", "reading", "ack"),
    ("read", "check", "reading", "check"),
    ("read", "list_cmd", "reading", "list_cmd"),
    ("read", "thread", "reading", "thread"),
    ("sending", "send", "sends", "send"),
    ("sending", "reply", "sends", "reply"),
    ("daemon", "status", "daemon_ops", "status"),
    ("daemon", "ctl", "daemon_ops", "ctl"),
    ("agents", "list_agents", "agents_ops", "list_agents"),
]


@pytest.mark.parametrize(("decl", "name", "body", "fn"), DECLARED)
def test_a_body_takes_its_declarations_parameters(decl: str, name: str, body: str,
                                                  fn: str) -> None:  # fmt: skip
    import importlib

    declared = inspect.signature(getattr(importlib.import_module(f"agentmaild.cli.{decl}"), name))
    plain = inspect.signature(getattr(importlib.import_module(f"agentmaild.cli.{body}"), fn))
    assert [(p.name, p.default, p.kind) for p in declared.parameters.values()] == [
        (p.name, p.default, p.kind) for p in plain.parameters.values()
    ]


@pytest.fixture
def template(tmp_path: Path) -> Path:
    """bob, carol (ended); bob's message to the operator (its id in ``id.txt``) and lead's two
    to bob, one in the same thread."""
    db = tmp_path / "template.db"
    store = with_bob_and_ended_carol(db)
    mailer = Mailer(store)
    first = mailer.send(sender="bob", to="operator", subject="Task 7", body="done?").ids[0]
    mailer.send(sender="lead", to="bob", subject="go", body="build it\x1b[31m red", priority="high")
    mailer.send(sender="lead", to="bob", subject="re", body="and this", thread_id=first)
    (tmp_path / "id.txt").write_text(first)
    store.close()
    return db


# case → (the typer command's argv, the body's module, function, kwargs[, root options])
CASES: dict[str, tuple[Any, ...]] = {
    "inbox": (["inbox", "--agent", "bob"], "reading", "inbox", {"agent": "bob"}),
    "inbox, unread, json": (["inbox", "-a", "bob", "--unread", "--json"], "reading", "inbox",
                            {"agent": "bob", "unread": True, "as_json": True}),
    "inbox of no agent": (["inbox", "-a", "zed"], "reading", "inbox", {"agent": "zed"}),
    "read": (["read", "{id}"], "reading", "read_cmd", {"message_id": "{id}"}),
    "read, json": (["read", "{id}", "--json"], "reading", "read_cmd",
                   {"message_id": "{id}", "as_json": True}),
    "read no message, root json": (["--json", "read", NOBODY], "reading", "read_cmd",
                                   {"message_id": NOBODY}, {"json": True}),
    "read a malformed id": (["read", "msg-../x"], "reading", "read_cmd",
                            {"message_id": "msg-../x"}),
    "ack": (["ack", "{id}"], "reading", "ack", {"message_ids": ["{id}"]}),
    "ack an unknown id": (["ack", "{id}", NOBODY], "reading", "ack",
                          {"message_ids": ["{id}", NOBODY]}),
    "check": (["check", "--agent", "bob"], "reading", "check", {"agent": "bob"}),
    "check, json": (["check", "-a", "bob", "--json"], "reading", "check",
                    {"agent": "bob", "as_json": True}),
    "check with no agent (usage)": (["check"], "reading", "check", {}),
    "list": (["list"], "reading", "list_cmd", {}),
    "list, filtered, json": (["list", "--from", "lead", "-n", "1", "--json"], "reading",
                             "list_cmd", {"sender": "lead", "limit": 1, "as_json": True}),
    "thread": (["thread", "{id}"], "reading", "thread", {"message_id": "{id}"}),
    "thread missing": (["thread", NOBODY], "reading", "thread", {"message_id": NOBODY}),
    "thread missing, json": (["thread", NOBODY, "--json"], "reading", "thread",
                             {"message_id": NOBODY, "as_json": True}),
    "status": (["status"], "daemon_ops", "status", {}),
    "status, json": (["status", "--json"], "daemon_ops", "status", {"as_json": True}),
    "ctl ping, no daemon": (["ctl", "ping"], "daemon_ops", "ctl", {"cmd": "ping"}),
    "ctl ping, no daemon, json": (["ctl", "ping", "--json"], "daemon_ops", "ctl",
                                  {"cmd": "ping", "as_json": True}),
    "ctl, a bad argument": (["ctl", "pause", "agent"], "daemon_ops", "ctl",
                            {"cmd": "pause", "args": ["agent"]}),
    "agents list": (["agents", "list"], "agents_ops", "list_agents", {}),
    "agents list, json": (["agents", "list", "--json"], "agents_ops", "list_agents",
                          {"as_json": True}),
    "send": (["send", "--from", "lead", "--to", "bob", "-s", "hi", "-b", "x"], "sends", "send",
             {"to": "bob", "subject": "hi", "body": "x", "sender": "lead"}),
    "send to a group, json": (["send", "--to", "@builders", "-s", "all", "-p", "urgent",
                               "--json"], "sends", "send",
                              {"to": "@builders", "subject": "all", "priority": "urgent",
                               "as_json": True}),
    "send to an unknown agent": (["send", "--to", "zed", "-s", "hi"], "sends", "send",
                                 {"to": "zed", "subject": "hi"}),
    "send, bad priority (usage)": (["send", "--to", "bob", "-s", "hi", "-p", "mega"], "sends",
                                   "send", {"to": "bob", "subject": "hi", "priority": "mega"}),
    "send, bad priority, json": (["send", "--to", "bob", "-s", "hi", "-p", "x", "--json"],
                                 "sends", "send",
                                 {"to": "bob", "subject": "hi", "priority": "x",
                                  "as_json": True}),
    "reply": (["reply", "{id}", "-b", "yes"], "sends", "reply",
              {"message_id": "{id}", "body": "yes"}),
    "reply, json": (["reply", "{id}", "-b", "yes", "-p", "high", "--json"], "sends", "reply",
                    {"message_id": "{id}", "body": "yes", "priority": "high", "as_json": True}),
    "reply to no message": (["reply", NOBODY, "-b", "x"], "sends", "reply",
                            {"message_id": NOBODY, "body": "x"}),
}  # fmt: skip

_IDS = re.compile(rb"(msg|bc)-[0-9a-z]+")
_STAMPS = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


def _run(argv: list[str], db: Path) -> tuple[object, ...]:
    env = {**os.environ, "AGENTMAIL_DB": str(db), "AGENTMAIL_AGENT": ""}
    env.pop("AGENTMAIL_URL", None)
    env.pop("AGENTMAIL_TOKEN", None)
    p = subprocess.run(argv, capture_output=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    store = SqliteMailStore(db)
    rows = [(m.from_agent, m.to_agent, m.subject, m.body, m.priority, m.read, m.thread_id)
            for m in store.list_messages()]  # fmt: skip
    store.close()
    out = _STAMPS.sub(b"STAMP", _IDS.sub(b"ID", p.stdout.replace(str(db).encode(), b"DB")))
    rows = [tuple("ID" if isinstance(v, str) and _IDS.fullmatch(v.encode()) else v for v in r)
            for r in rows]  # fmt: skip
    return p.returncode, out, p.stderr.replace(str(db).encode(), b"DB"), sorted(rows, key=str)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_body_answers_as_its_typer_command(template: Path, tmp_path: Path, case: str) -> None:
    argv, module, fn, kwargs, *root = CASES[case]
    first = (tmp_path / "id.txt").read_text()
    argv = [first if a == "{id}" else a for a in argv]
    kwargs = json.loads(json.dumps(kwargs).replace("{id}", first))
    typed, plain = tmp_path / "typer.db", tmp_path / "plain.db"
    shutil.copy(template, typed)
    shutil.copy(template, plain)
    want = _run([sys.executable, "-c", TYPER, *argv], typed)
    got = _run([sys.executable, "-c", BODY, module, fn, json.dumps(kwargs),
                json.dumps(root[0] if root else {})], plain)  # fmt: skip
    assert got == want
    assert got[0] in (0, 1, 2) and (got[1] or got[2])  # it said something either way


def test_the_exit_codes_of_call() -> None:
    from agentmaild.cli import plain
    from agentmaild.errors import NotFound, UsageError

    def raises(exc: BaseException) -> Any:
        def body(as_json: bool = False) -> None:
            raise exc

        return body

    assert plain.call(lambda: None, {}) == 0
    assert plain.call(raises(plain.Exit(3)), {}) == 3
    assert plain.call(raises(UsageError("u")), {}) == 2
    assert plain.call(raises(NotFound("n")), {}) == 1


def test_echo_strips_ansi_styling_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from agentmaild.cli import plain

    plain.echo("\x1b[31mred\x1b[0m")
    plain.echo("\x1b[31mkept\x1b[0m", color=True, nl=False)
    plain.echo("err", err=True)
    got = capsys.readouterr()
    assert got.out == "red\n\x1b[31mkept\x1b[0m"
    assert got.err == "err\n"
