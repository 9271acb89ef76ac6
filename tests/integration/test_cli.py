"""The real CLI as a child process against a real SQLite file (SPEC §2-§4, issue 2 item 6).

State is seeded through the Python API where the command under test is not the one seeding, to
keep the number of (≈0.25 s) process starts down; every command under test runs as a process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore

pytestmark = pytest.mark.timeout(60)

CLI = [sys.executable, "-m", "agentmaild"]
SUMMARY_KEYS = {"id", "from", "type", "priority", "subject", "created_at", "size"}


def clean_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENTMAIL_", "AGENTMAILD_", "CLAUDE"))
    }
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), PYTHONIOENCODING="utf-8")
    return env


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "…"


@dataclass
class Cli:
    tmp: Path
    db: Path
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)

    def run(
        self,
        *args: str,
        stdin: bytes | None = None,
        env: Mapping[str, str | None] | None = None,
        cwd: Path | None = None,
        prefix: Sequence[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        full_env = dict(self.env)
        for k, v in (env or {}).items():
            if v is None:
                full_env.pop(k, None)
            else:
                full_env[k] = v
        proc = subprocess.run(
            [*CLI, *prefix, *args],
            input=stdin if stdin is not None else b"",
            capture_output=True,
            env=full_env,
            cwd=cwd or self.cwd,
            timeout=30,
        )
        return subprocess.CompletedProcess(
            proc.args,
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )

    def ok(self, *args: str, **kw: Any) -> dict[str, Any]:
        """Run with --json; expect exit 0 and {"ok": true, ...} on stdout."""
        proc = self.run(*args, "--json", **kw)
        assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
        data: dict[str, Any] = json.loads(proc.stdout)
        assert data["ok"] is True, data
        return data

    def err(
        self, *args: str, code: str | None = None, exit_code: int = 1, **kw: Any
    ) -> dict[str, Any]:
        """Run with --json; expect the error object on stdout and exit 1 (2: usage errors)."""
        proc = self.run(*args, "--json", **kw)
        lines = proc.stdout.strip().splitlines()
        assert len(lines) == 1, (proc.returncode, proc.stdout[:300], proc.stderr[:300])
        data = json.loads(lines[0])
        short = _short(data)
        assert data["ok"] is False, short
        assert set(data["error"]) == {"code", "message"}
        assert isinstance(data["error"]["message"], str) and data["error"]["message"]
        if code is not None:
            assert data["error"]["code"] == code, short
        assert proc.returncode == exit_code, (
            f"error {short} exited {proc.returncode}, expected {exit_code}"
        )
        error: dict[str, Any] = data["error"]
        return error

    # -- direct access to the same file -------------------------------------------------------
    def store(self) -> SqliteMailStore:
        return SqliteMailStore(self.db)

    def seed(self, *agents: tuple[str, str]) -> None:
        with_store = self.store()
        try:
            for name, cap in agents:
                with_store.add_agent(Agent(name=name, capability=cap))
        finally:
            with_store.close()

    def send(self, **kw: Any) -> str:
        s = self.store()
        try:
            return Mailer(s).send(**kw).ids[0]
        finally:
            s.close()

    def rows(self, db: Path | None = None) -> list[tuple[Any, ...]]:
        path = db or self.db
        if not path.exists():
            return []
        conn = sqlite3.connect(path)
        try:
            return conn.execute(
                "SELECT id, from_agent, to_agent, subject, read FROM messages ORDER BY id"
            ).fetchall()
        finally:
            conn.close()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    work = tmp_path / "work" / "deep"
    home.mkdir()
    work.mkdir(parents=True)
    db = tmp_path / "store" / "mail.db"
    env = clean_env(home)
    env["AGENTMAIL_DB"] = str(db)
    return Cli(tmp=tmp_path, db=db, cwd=work, env=env)


def files_under(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not p.name.startswith("mail.db") and "__pycache__" not in p.parts
        and ".cache" not in p.parts  # compiled code kept between runs, like __pycache__
    }


# ---- send / inbox / read / ack -------------------------------------------------------------


def test_send_inbox_read_ack_cycle(cli: Cli) -> None:
    added = cli.ok("agents", "add", "b1", "--capability", "builder")
    assert added["agent"]["name"] == "b1" and added["agent"]["state"] == "booting"

    body = "line one\nline two — ünïcode\n\n"
    sent = cli.ok(
        "send",
        "--to",
        "b1",
        "--subject",
        "hello",
        "--body",
        "-",
        "--priority",
        "high",
        stdin=body.encode(),
    )
    (mid,) = sent["ids"]
    assert mid.startswith("msg-") and sent["recipients"] == ["b1"] and sent["duplicate"] is False

    inbox = cli.ok("inbox", "--agent", "b1")
    (summary,) = inbox["messages"]
    assert SUMMARY_KEYS <= set(summary)
    assert "body" not in summary
    assert (summary["id"], summary["from"], summary["subject"]) == (mid, "operator", "hello")

    read = cli.ok("read", mid)["message"]
    assert read["body"] == body
    assert (read["id"], read["to"], read["priority"], read["read"]) == (mid, "b1", "high", False)
    assert cli.rows() == [(mid, "operator", "b1", "hello", 0)], "read must not change state"

    unread = cli.ok("inbox", "--agent", "b1", "--unread")
    assert [m["id"] for m in unread["messages"]] == [mid]

    acked = cli.ok("ack", mid)
    assert acked["acked"] == [mid] and acked["skipped"] == []
    assert cli.rows()[0][-1] == 1
    again = cli.ok("ack", mid, "msg-unknown00000000")
    assert again["acked"] == [] and again["skipped"] == [mid, "msg-unknown00000000"]
    assert cli.ok("inbox", "--agent", "b1", "--unread")["messages"] == []


def test_human_output(cli: Cli) -> None:
    sent = cli.run("send", "--to", "operator", "--subject", "plain", "--body", "text body")
    assert sent.returncode == 0, sent.stderr
    mid = sent.stdout.strip()
    assert mid.startswith("msg-") and "\n" not in mid
    read = cli.run("read", mid)
    assert read.returncode == 0
    assert f"id:       {mid}" in read.stdout and read.stdout.rstrip().endswith("text body")


# ---- check ---------------------------------------------------------------------------------


def test_check_inject_fast_path(cli: Cli) -> None:
    cli.seed(("b1", "builder"))
    normal = cli.send(sender="lead1", to="b1", subject="routine", body="r")
    urgent = cli.send(sender="lead1", to="b1", subject="fire", body="f", priority="urgent")
    data = cli.ok("check", "--inject", "--agent", "b1")
    assert data["acked"] == [urgent, normal]  # priority first
    assert data["text"].startswith("PRIORITY:")
    assert "fire" in data["text"].splitlines()[0]
    assert all(r[-1] == 1 for r in cli.rows())
    empty = cli.run("check", "--inject", "--agent", "b1")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "")

    cli.send(sender="lead1", to="b1", subject="later", body="the body")
    text = cli.run(
        "check",
        "--inject",
        "--agent=b1",
        "--db",
        str(cli.db),
        env={"AGENTMAIL_DB": str(cli.tmp / "elsewhere.db")},
    )
    assert text.returncode == 0
    assert not text.stdout.startswith("PRIORITY:")
    assert "later" in text.stdout and "the body" in text.stdout


def test_check_inject_takes_the_fast_path(cli: Cli) -> None:
    """`check --inject` is on the hook hot path: it must not import typer, structlog, asyncio, or
    psycopg (only a PostgreSQL store loads it)."""
    cli.seed(("b1", "builder"))
    cli.send(sender="lead1", to="b1", subject="s", body="b")
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "agentmaild",
            "check",
            "--inject",
            "--agent",
            "b1",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=cli.env,
        cwd=cli.cwd,
        timeout=30,
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["ok"] is True
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "agentmaild.hot.check" in imported
    heavy = sorted(
        m
        for m in imported
        if m.split(".")[0] in {"typer", "click", "structlog", "asyncio", "psycopg"}
        or m.startswith(("agentmaild.store.postgres", "agentmaild.store.port_postgres"))
    )
    assert heavy == []
    assert len(json.loads(proc.stdout)["acked"]) == 1


def test_check_without_inject_fetches_all_unread_and_acks(cli: Cli) -> None:
    cli.seed(("b1", "builder"))
    low = cli.send(sender="lead1", to="b1", subject="low", body="l", priority="low")
    high = cli.send(sender="lead1", to="b1", subject="high", body="h", priority="high")
    data = cli.ok("check", env={"AGENTMAIL_AGENT": "b1"})  # --agent defaults to AGENTMAIL_AGENT
    assert data["agent"] == "b1"
    assert [m["id"] for m in data["messages"]] == [high, low]
    assert [m["body"] for m in data["messages"]] == ["h", "l"]
    assert all(r[-1] == 1 for r in cli.rows())
    assert cli.ok("check", "--agent", "b1")["messages"] == []


def test_check_rejects_bad_agent_names(cli: Cli) -> None:
    cli.err("check", "--inject", "--agent", "../x", code="invalid")
    cli.err("check", "--agent", "../x", code="invalid")
    assert not (cli.tmp / "work" / "x").exists()


# ---- list / thread / purge -----------------------------------------------------------------


def test_list_filters(cli: Cli) -> None:
    cli.seed(("b1", "builder"), ("b2", "builder"))
    m1 = cli.send(sender="operator", to="b1", subject="one", body="")
    m2 = cli.send(sender="operator", to="b2", subject="two", body="", type="question")
    m3 = cli.send(sender="b1", to="b2", subject="three", body="")
    s = cli.store()
    s.ack([m2])
    s.close()

    def ids(*args: str) -> list[str]:
        data = cli.ok("list", *args)
        assert all("body" not in m for m in data["messages"])
        return [m["id"] for m in data["messages"]]

    assert ids() == [m3, m2, m1]  # newest first
    assert ids("--from", "b1") == [m3]
    assert ids("--to", "b2", "--unread") == [m3]
    assert ids("--type", "question") == [m2]
    assert ids("--from", "operator", "--limit", "1") == [m2]


def test_thread(cli: Cli) -> None:
    cli.seed(("b1", "builder"))
    root = cli.send(sender="operator", to="b1", subject="topic", body="")
    s = cli.store()
    r1 = Mailer(s).reply(root, sender="b1", body="a").ids[0]
    r2 = Mailer(s).reply(r1, sender="operator", body="b").ids[0]
    Mailer(s).send(sender="operator", to="b1", subject="unrelated", body="")
    s.close()
    data = cli.ok("thread", r2)
    assert [m["id"] for m in data["messages"]] == [root, r1, r2]
    assert [m["body"] for m in data["messages"]] == ["", "a", "b"]
    cli.err("thread", "msg-nosuchthread00", code="not_found")


def test_purge(cli: Cli) -> None:
    cli.seed(("b1", "builder"), ("b2", "builder"))
    old = cli.send(sender="operator", to="b1", subject="old", body="")
    cli.send(sender="operator", to="b1", subject="new", body="")
    cli.send(sender="b1", to="b2", subject="to b2", body="")
    cli.send(sender="operator", to="b2", subject="to b2 again", body="")
    conn = sqlite3.connect(cli.db)
    conn.execute("UPDATE messages SET created_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", (old,))
    conn.commit()
    conn.close()

    err = cli.err("purge", code="usage", exit_code=2)
    assert "--days" in err["message"] and "--all" in err["message"]
    assert len(cli.rows()) == 4
    assert cli.ok("purge", "--days", "5")["deleted"] == 1
    assert old not in {r[0] for r in cli.rows()}
    assert cli.ok("purge", "--agent", "b2")["deleted"] == 2
    assert [r[3] for r in cli.rows()] == ["new"]
    assert cli.ok("purge", "--all")["deleted"] == 1
    assert cli.rows() == []


# ---- agents and limits ---------------------------------------------------------------------


def test_agents_commands(cli: Cli) -> None:
    a = cli.ok(
        "agents",
        "add",
        "b1",
        "--capability",
        "builder",
        "--parent",
        "lead1",
        "--channel",
        "tmux",
        "--tmux-target",
        "work:1.0",
        "--tmux-socket",
        "agents",
    )["agent"]
    assert (a["channel"], a["tmux_target"], a["tmux_socket"], a["parent"]) == (
        "tmux",
        "work:1.0",
        "agents",
        "lead1",
    )
    cli.ok(
        "agents",
        "add",
        "w1",
        "--capability",
        "custom-cap",
        "--channel",
        "spawn",
        "--command",
        "my-agent --flag 'two words'",
        "--cwd",
        str(cli.tmp),
    )
    cli.err("agents", "add", "b1", "--capability", "builder", code="conflict")
    spawn_without_command = ("agents", "add", "s1", "--capability", "builder", "--channel", "spawn")
    cli.err(*spawn_without_command, code="usage", exit_code=2)
    cli.err("agents", "add", "Bad/Name", "--capability", "builder", code="invalid")

    listed = cli.ok("agents", "list")["agents"]
    assert [x["name"] for x in listed] == ["b1", "w1"]
    w1 = cli.ok("agents", "show", "w1")["agent"]
    assert w1["command"] == ["my-agent", "--flag", "two words"]
    assert w1["cwd"] == str(cli.tmp.resolve())
    upd = cli.ok("agents", "update", "b1", "--capability", "reviewer")["agent"]
    assert upd["capability"] == "reviewer" and upd["tmux_target"] == "work:1.0"

    assert cli.ok("agents", "remove", "b1")["removed"] == "b1"
    cli.err("agents", "show", "b1", code="not_found")
    cli.err("agents", "remove", "b1", code="not_found")


def test_agents_set_state_follows_the_transition_table(cli: Cli) -> None:
    cli.seed(("b1", "builder"))

    def state(to: str, *extra: str) -> str:
        return str(cli.ok("agents", "set-state", "b1", to, *extra)["agent"]["state"])

    assert state("working") == "working"
    refused = cli.err("agents", "set-state", "b1", "booting", code="invalid_state")
    assert "allowed" in refused["message"]
    assert state("completed") == "completed"
    cli.err("agents", "set-state", "b1", "working", code="invalid_state")
    assert state("booting") == "booting"
    assert state("zombie") == "zombie"
    cli.err("agents", "set-state", "b1", "idle", code="invalid_state")
    cli.err("agents", "set-state", "b1", "sleeping", code="invalid_state")
    assert state("idle", "--force") == "idle"


def test_limits_reset(cli: Cli) -> None:
    cli.seed(("b1", "builder"))
    store = cli.store()
    store.set_team_rules({"rate_limit_max": 1}, now=0)  # the store's rule, as its daemon writes
    store.close()
    cli.ok("send", "--to", "b1", "--subject", "one")
    err = cli.err("send", "--to", "b1", "--subject", "two", code="rate_limited")
    assert "operator" in err["message"] and "b1" in err["message"]
    assert len(cli.rows()) == 1
    assert cli.ok("limits", "reset", "--from", "operator", "--to", "b1")["cleared"] >= 1
    cli.ok("send", "--to", "b1", "--subject", "three")
    assert len(cli.rows()) == 2


# ---- sending details -----------------------------------------------------------------------


def test_sender_resolution(cli: Cli) -> None:
    both = cli.ok(
        "send", "--to", "operator", "--subject", "a", "--from", "b1", env={"AGENTMAIL_AGENT": "b2"}
    )["ids"][0]
    env_only = cli.ok("send", "--to", "operator", "--subject", "b", env={"AGENTMAIL_AGENT": "b2"})[
        "ids"
    ][0]
    default = cli.ok("send", "--to", "operator", "--subject", "c")["ids"][0]
    senders = {r[0]: r[1] for r in cli.rows()}
    assert senders == {both: "b1", env_only: "b2", default: "operator"}
    cli.err(
        "send",
        "--to",
        "operator",
        "--subject",
        "d",
        env={"AGENTMAIL_AGENT": "Not A Name"},
        code="invalid",
    )


def test_groups_payloads_idempotency_and_reply(cli: Cli) -> None:
    cli.seed(("b1", "builder"), ("b2", "builder"), ("r1", "reviewer"))
    group = cli.ok("send", "--to", "@builders", "--subject", "all", "--from", "b1")
    assert group["recipients"] == ["b2"] and group["broadcast_id"]
    err = cli.err("send", "--to", "@wizards", "--subject", "x", code="invalid")
    assert "@all" in err["message"] and "@builder" in err["message"]

    payload = {"taskId": "t1", "branch": "feat", "exitCode": 0, "filesModified": ["a.py"]}
    done = cli.ok(
        "send",
        "--to",
        "r1",
        "--subject",
        "done",
        "--type",
        "worker_done",
        "--payload",
        json.dumps(payload),
        "--from",
        "b1",
    )["ids"][0]
    bad = cli.err(
        "send",
        "--to",
        "r1",
        "--subject",
        "done",
        "--type",
        "worker_done",
        "--payload",
        json.dumps({**payload, "exitCode": "0"}),
        code="invalid",
    )
    assert "payload.exitCode" in bad["message"]

    first = cli.ok("send", "--to", "b1", "--subject", "k", "--idempotency-key", "key-1")
    again = cli.ok("send", "--to", "b1", "--subject", "k", "--idempotency-key", "key-1")
    assert again["ids"] == first["ids"] and again["duplicate"] is True
    cli.err(
        "send",
        "--to",
        "b1",
        "--subject",
        "k",
        "--body",
        "changed",
        "--idempotency-key",
        "key-1",
        code="conflict",
    )
    assert len(cli.rows()) == 3

    reply = cli.ok("reply", done, "--body", "reviewing", "--from", "r1")
    msg = cli.ok("read", reply["ids"][0])["message"]
    assert (msg["from"], msg["to"], msg["subject"], msg["thread_id"]) == (
        "r1",
        "b1",
        "Re: done",
        done,
    )

    s = cli.store()
    s.set_agent_state("b1", "zombie", force=True)
    s.close()
    refused = cli.err("reply", done, "--body", "too late", "--from", "r1", code="recipient_refused")
    assert "zombie" in refused["message"]
    refused = cli.err("send", "--to", "b1", "--subject", "x", code="recipient_refused")
    assert "zombie" in refused["message"]
    assert len(cli.rows()) == 4


# ---- errors --------------------------------------------------------------------------------


def test_error_shape_human_and_json(cli: Cli) -> None:
    human = cli.run("send", "--to", "ghost", "--subject", "x")
    assert human.stdout == ""
    note, *lines = human.stderr.splitlines()  # the first command here makes the store: it says so
    assert note.startswith("agentmaild: created a new store at ")
    assert len(lines) == 1 and lines[0].startswith("error: ") and "ghost" in lines[0]
    assert human.returncode == 1

    err = cli.err("send", "--to", "ghost", "--subject", "x", code="recipient_refused")
    assert "ghost" in err["message"]
    # the global form: agentmaild --json <cmd>
    proc = cli.run("send", "--to", "ghost", "--subject", "x", prefix=("--json",))
    data = json.loads(proc.stdout)
    assert data["ok"] is False and data["error"]["code"] == "recipient_refused"
    assert proc.returncode == 1
    assert cli.rows() == []


@pytest.mark.parametrize(
    ("args", "as_json"),
    [
        (("send", "--subject", "x"), False),  # missing --to
        (("no-such-command",), False),
        (("list", "--limit", "0"), False),
        (("send", "--subject", "x"), True),
    ],
)
def test_usage_errors_exit_2(cli: Cli, args: tuple[str, ...], as_json: bool) -> None:
    proc = cli.run(*args, *(("--json",) if as_json else ()))
    if as_json:
        data = json.loads(proc.stdout)
        assert data["ok"] is False and data["error"]["code"] == "usage"
    else:
        assert proc.stderr.startswith("error: ") and proc.stdout == ""
    assert proc.returncode == 2


BAD_IDS = [
    "../x",
    "/etc/passwd",
    "msg-../../x",
    "msg-abc\x01def",
    "msg-abc\n",
    "msg-" + "a" * 10240,
    "x" * 10240,
]


def _seed_one(cli: Cli) -> str:
    cli.seed(("b1", "builder"))
    return cli.send(sender="operator", to="b1", subject="keep", body="")


@pytest.mark.parametrize(
    "bad", BAD_IDS, ids=["dotdot", "abs", "msg-dotdot", "ctrl", "newline", "10k-msg", "10k"]
)
def test_malformed_id_is_a_clear_error_touching_nothing(cli: Cli, bad: str) -> None:
    good = _seed_one(cli)
    before_rows = cli.rows()
    before_files = files_under(cli.tmp)
    err = cli.err("read", bad, code="invalid")
    assert "invalid message id" in err["message"]
    assert "\n" not in err["message"]
    assert cli.rows() == before_rows
    assert files_under(cli.tmp) == before_files
    assert not (cli.cwd.parent / "x").exists()
    assert good in {r[0] for r in before_rows}


def test_malformed_ids_on_every_id_taking_command(cli: Cli) -> None:
    good = _seed_one(cli)
    before_rows = cli.rows()
    before_files = files_under(cli.tmp)
    cli.err("ack", good, "../x", code="invalid")  # one bad id: nothing is acked
    cli.err("thread", "msg-../../x", code="invalid")
    cli.err("reply", "/etc/passwd", "--body", "x", code="invalid")
    cli.err("send", "--to", "b1", "--subject", "s", "--thread", "../x", code="invalid")
    human = cli.run("read", "../x")
    assert human.stderr.startswith("error: invalid message id") and human.returncode == 1
    assert cli.rows() == before_rows
    assert files_under(cli.tmp) == before_files


def test_invalid_utf8_on_stdin_body(cli: Cli) -> None:
    err = cli.err(
        "send",
        "--to",
        "operator",
        "--subject",
        "s",
        "--body",
        "-",
        stdin=b"ok \xff\xfe bad",
        code="invalid",
    )
    assert "UTF-8" in err["message"] and "body" in err["message"]
    assert cli.rows() == []


# ---- store selection -----------------------------------------------------------------------


def test_db_flag_beats_env_and_global_form_works(cli: Cli) -> None:
    flag_db = cli.tmp / "flag" / "mail.db"
    env_db = cli.tmp / "env" / "mail.db"
    env = {"AGENTMAIL_DB": str(env_db)}
    a = cli.ok("send", "--to", "operator", "--subject", "via flag", "--db", str(flag_db), env=env)
    assert [r[0] for r in cli.rows(flag_db)] == a["ids"]
    assert cli.rows(env_db) == []
    b = cli.ok("send", "--to", "operator", "--subject", "via env", env=env)
    assert [r[0] for r in cli.rows(env_db)] == b["ids"]
    # global options before the command
    proc = cli.run("list", prefix=("--db", str(flag_db), "--json"), env=env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [m["id"] for m in data["messages"]] == a["ids"]
    assert cli.rows() == []  # the fixture's AGENTMAIL_DB was overridden every time
