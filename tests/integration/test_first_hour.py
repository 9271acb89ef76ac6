"""What a new user meets in the first hour (issue "The first hour", §2): the real CLI as a child
process against real SQLite files, a real daemon where delivery matters.

Read-only stores: the tests run as root, whom file modes do not stop, so the CLI child runs with
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its capability bounding set (root then
obeys file modes like anyone); a non-root run needs nothing dropped.
"""

from __future__ import annotations

import ctypes
import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild import __version__
from agentmaild.config import LimitsConfig
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.integration.test_cli import Cli, clean_env
from tests.support.daemon import DaemonProc
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

REPO = Path(__file__).resolve().parents[2]
AGENTS = REPO / "tests" / "agents"
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    db = tmp_path / "store" / "mail.db"
    env = clean_env(home)
    env["AGENTMAIL_DB"] = str(db)
    return Cli(tmp=tmp_path, db=db, cwd=work, env=env)


def seeded(cli: Cli, *names: str) -> SqliteMailStore:
    store = cli.store()
    for name in names:
        store.add_agent(Agent(name=name, capability="builder"))
    return store


def one_error_line(proc: subprocess.CompletedProcess[str], exit_code: int = 1) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == exit_code, (proc.returncode, proc.stdout[:300], proc.stderr[:300])
    assert len(lines) == 1 and lines[0].startswith("error: ") and proc.stdout == "", proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


# ---- 1. --version, bare commands -----------------------------------------------------------


def test_version_prints_the_package_version(cli: Cli) -> None:
    human = cli.run("--version")
    assert (human.returncode, human.stdout, human.stderr) == (0, f"agentmaild {__version__}\n", "")
    for order in (("--version", "--json"), ("--json", "--version")):
        proc = cli.run(*order)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"ok": True, "version": __version__}


@pytest.mark.parametrize("args", [(), ("agents",), ("hooks",)], ids=["bare", "agents", "hooks"])
def test_a_bare_group_prints_its_help_and_no_empty_error(cli: Cli, args: tuple[str, ...]) -> None:
    proc = cli.run(*args)
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout and "Commands" in proc.stdout
    assert "error" not in proc.stderr
    # any other usage error stays one line, exit 2
    assert "bogus" in one_error_line(cli.run(*args, "bogus"), exit_code=2)
    assert "No such option: --bogus" in one_error_line(cli.run(*args, "--bogus"), exit_code=2)


# ---- 2. a missing option is a usage error ----------------------------------------------------

MISSING = {
    "purge": ("purge",),
    "check": ("check",),
    "check-inject": ("check", "--inject"),  # the typer-free fast path
    "retry-both": ("retry", "--agent", "b1", "--delivery", "dlv-abcdef12"),
    "tmux-target": ("agents", "add", "t1", "--capability", "builder", "--channel", "tmux"),
    "service-both": ("service", "install", "--systemd", "--launchd", "--print"),
}


@pytest.mark.parametrize("args", list(MISSING.values()), ids=list(MISSING))
def test_a_missing_option_exits_2_with_code_usage(cli: Cli, args: tuple[str, ...]) -> None:
    seeded(cli, "b1").close()
    line = one_error_line(cli.run(*args), exit_code=2)
    assert "--" in line  # names the option to give
    err = cli.err(*args, code="usage", exit_code=2)
    assert err["message"] == line.removeprefix("error: ")


# ---- 3. truthful status and check ------------------------------------------------------------


def test_status_state_leaves_booting_once_mail_is_delivered(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "demo.jsonl"
    store = cli.store()
    command = (sys.executable, str(AGENTS / "record_agent.py"), str(log))
    store.add_agent(Agent(name="demo", capability="builder", channel="spawn", command=command))
    store.add_agent(Agent(name="idle1", capability="builder", channel="spawn", command=command))
    daemon = DaemonProc(cli.db, tmp_path, {"AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.2"}, text=True)
    daemon.start()
    try:
        mid = Mailer(store).send(sender="operator", to="demo", subject="hello", body="hi").ids[0]
        wait_for(lambda: store.get_message(mid).read, 20, "the delivery to be acked")  # type: ignore[union-attr]
        wait_for(lambda: daemon.status_row("demo")["loop"] == "idle", 20, "the loop to settle")
        proc = daemon.cli("status", "--json")
        assert proc.returncode == 0, proc.stderr
        rows = {r["agent"]: r for r in json.loads(proc.stdout)["agents"]}
        # STATE is the registration's lifecycle, LOOP the daemon's delivery loop: distinct.
        assert (rows["demo"]["state"], rows["demo"]["loop"]) == ("working", "idle")
        assert rows["idle1"]["state"] == "booting"  # never reached: still booting
        human = daemon.cli("status").stdout.splitlines()
        header = next(line for line in human if line.startswith("AGENT"))
        demo = next(line for line in human if line.startswith("demo "))
        at = header.index("STATE")
        assert demo[at:].split()[0] == "working", human
    finally:
        daemon.stop()
        store.close()


def test_check_prints_the_truth_about_what_it_took(cli: Cli) -> None:
    store = seeded(cli, "b1")
    body = "twenty-six characters long"
    assert len(body) == 26
    Mailer(store).send(sender="operator", to="b1", subject="a subject line", body=body)
    store.close()
    listed = cli.run("inbox", "--agent", "b1")
    assert listed.returncode == 0 and "(26 chars)" in listed.stdout, listed.stdout
    taken = cli.run("check", "--agent", "b1")
    assert taken.returncode == 0, taken.stderr
    assert "read:     yes" in taken.stdout and "read:     no" not in taken.stdout
    as_json = cli.store()
    try:
        agent = as_json.get_agent("b1")
        assert agent is not None and agent.state == "working"  # it took mail: no longer booting
    finally:
        as_json.close()


# ---- 4. unknown agents -----------------------------------------------------------------------

READERS = {
    "inbox": ("inbox", "--agent"),
    "check": ("check", "--agent"),
    "check-inject": ("check", "--inject", "--agent"),
}


@pytest.mark.parametrize("reader", list(READERS.values()), ids=list(READERS))
def test_reading_mail_of_an_unknown_agent_is_an_error(cli: Cli, reader: tuple[str, ...]) -> None:
    seeded(cli, "b1").close()
    line = one_error_line(cli.run(*reader, "nobody"))
    assert "unknown agent 'nobody'" in line and "agents add" in line
    cli.err(*reader, "nobody", code="not_found")
    # operator needs no registration; a registered agent with no mail is fine
    for name in ("operator", "b1"):
        proc = cli.run(*reader, name)
        assert proc.returncode == 0 and proc.stderr == "", (name, proc.stderr)
    # an unregistered name that was mailed (send accepts it when the config allows) is known
    store = cli.store()
    lenient = Mailer(store, LimitsConfig(refuse_unknown_recipients=False))
    lenient.send(sender="b1", to="ghost", subject="for ghost", body="x")
    store.close()
    proc = cli.run(*reader, "ghost")
    assert proc.returncode == 0 and "for ghost" in proc.stdout, proc.stderr


def test_unknown_names_follow_the_config_like_send(cli: Cli) -> None:
    seeded(cli, "b1").close()
    cli.err("inbox", "--agent", "nobody", code="not_found")
    lenient = {"AGENTMAILD_LIMITS_REFUSE_UNKNOWN_RECIPIENTS": "false"}
    assert cli.ok("inbox", "--agent", "nobody", env=lenient)["messages"] == []
    assert cli.ok("check", "--agent", "nobody", env=lenient)["messages"] == []
    # the hook's typer-free path (fast.py) asks the same rule (store.checks.is_known)
    cli.err("check", "--inject", "--agent", "nobody", code="not_found")
    empty = {"ok": True, "acked": [], "text": ""}
    assert cli.ok("check", "--inject", "--agent", "nobody", env=lenient) == empty


def test_hooks_install_warns_about_an_unknown_agent(cli: Cli, tmp_path: Path) -> None:
    seeded(cli, "b1").close()
    project = tmp_path / "project"
    project.mkdir()
    ghost = cli.run("hooks", "install", "--agent", "ghost", "--dir", str(project))
    assert ghost.returncode == 0, ghost.stderr
    [warning] = ghost.stderr.splitlines()
    assert warning.startswith("warning: agent 'ghost' is unknown") and "agents add ghost" in warning
    assert (project / ".claude" / "settings.local.json").is_file()  # installed all the same
    known = cli.run("hooks", "install", "--agent", "b1", "--dir", str(project))
    assert known.returncode == 0 and known.stderr == "", known.stderr


# ---- 5. --db mistakes and read-only stores ---------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [("status",), ("send", "--to", "b1", "-s", "x"), ("check", "--inject", "--agent", "b1")],
    ids=["status", "send", "check-inject"],
)
def test_db_naming_a_directory_says_so(cli: Cli, tmp_path: Path, args: tuple[str, ...]) -> None:
    line = one_error_line(cli.run("--db", str(tmp_path), *args))
    assert f"{tmp_path}: is a directory, not a store file" in line


LOOKERS = {
    "status": ("status",),
    "inbox": ("inbox", "--agent", "b1"),
    "read": ("read", "msg-0000000000000000"),
    "list": ("list",),
    "thread": ("thread", "msg-0000000000000000"),
    "agents-list": ("agents", "list"),
    "check": ("check", "--agent", "b1"),
}


@pytest.mark.parametrize("args", list(LOOKERS.values()), ids=list(LOOKERS))
def test_a_command_that_only_looks_never_creates_a_store(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo.db"
    line = one_error_line(cli.run("--db", str(typo), *args))
    assert f"no store at {typo}" in line
    assert not typo.exists() and list(tmp_path.glob("typo.db*")) == []


def _drop_file_override() -> None:
    """In the child, before exec: root loses the right to ignore file modes."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run_confined(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentmaild", *args],
        env=cli.env,
        cwd=cli.cwd,
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=_drop_file_override,
    )


@pytest.fixture
def read_only_store(cli: Cli) -> Iterator[dict[str, Any]]:
    """A closed (checkpointed, no -wal/-shm) store: file 0444 in a directory 0555."""
    store = seeded(cli, "b1")
    sent = Mailer(store).send(sender="operator", to="b1", subject="keep me", body="body")
    store.close()
    assert sorted(p.name for p in cli.db.parent.iterdir()) == [".gitignore", "mail.db"]
    cli.db.chmod(0o444)
    cli.db.parent.chmod(0o555)
    before = cli.db.read_bytes()
    try:
        yield {"id": sent.ids[0], "bytes": before}
    finally:
        cli.db.parent.chmod(0o755)
        cli.db.chmod(0o644)


def test_read_only_commands_work_on_a_read_only_store(
    cli: Cli, read_only_store: dict[str, Any]
) -> None:
    # the confinement is real: a write fails, in one line
    line = one_error_line(run_confined(cli, "send", "--to", "b1", "-s", "no"))
    assert "readonly" in line or "read-only" in line
    mid = read_only_store["id"]
    for args in (
        ("status", "--json"),
        ("inbox", "--agent", "b1", "--json"),
        ("read", mid, "--json"),
        ("list", "--json"),
        ("thread", mid, "--json"),
        ("agents", "list", "--json"),
    ):
        proc = run_confined(cli, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert json.loads(proc.stdout)["ok"] is True
        assert "keep me" in proc.stdout or args[0] in ("status", "agents"), (args, proc.stdout)
    status = json.loads(run_confined(cli, "status", "--json").stdout)
    assert [a["agent"] for a in status["agents"]] == ["b1"] and status["totals"]["unread"] == 1
    assert sorted(p.name for p in cli.db.parent.iterdir()) == [".gitignore", "mail.db"]
    assert cli.db.read_bytes() == read_only_store["bytes"]


def test_an_old_schema_on_a_read_only_store_names_the_fix(cli: Cli) -> None:
    seeded(cli, "b1").close()
    conn = sqlite3.connect(cli.db)
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    mode = stat.S_IMODE(cli.db.stat().st_mode)
    cli.db.chmod(0o444)
    cli.db.parent.chmod(0o555)
    try:
        line = one_error_line(run_confined(cli, "status"))
    finally:
        cli.db.parent.chmod(0o755)
        cli.db.chmod(mode)
    assert "schema version 2" in line and "agentmaild serve" in line and "owner" in line
    # writable, the same read-only command upgrades the store once and works
    proc = cli.run("status")
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(cli.db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 3
    conn.close()


# ---- 6. make serve installs the package only -------------------------------------------------


def _pip_installs(target: str, venv: Path) -> list[str]:
    dry = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [line for line in dry.stdout.splitlines() if "pip install" in line]


def test_make_serve_installs_the_package_without_test_tools(tmp_path: Path) -> None:
    venv = tmp_path / "fresh-venv"  # nothing installed: make plans every step
    serve = [line for line in _pip_installs("serve", venv) if "--upgrade pip" not in line]
    assert serve and all(line.rstrip().endswith("install -q -e .") for line in serve), serve
    test = _pip_installs("test", venv)
    assert any(".[test,dev,docs]" in line for line in test), test


# ---- 7. operator mail ------------------------------------------------------------------------


def test_status_points_at_unread_operator_mail(cli: Cli) -> None:
    store = seeded(cli, "b1")
    for i in range(3):
        Mailer(store).send(sender="b1", to="operator", subject=f"report {i}", body="")
    store.close()
    human = cli.run("status")
    assert human.returncode == 0, human.stderr
    assert "operator: 3 unread — agentmaild inbox --agent operator" in human.stdout.splitlines()
    assert cli.ok("status")["operator_unread"] == 3
    assert len(cli.ok("inbox", "--agent", "operator")["messages"]) == 3
    assert len(cli.ok("check", "--agent", "operator")["messages"]) == 3
    assert cli.ok("status")["operator_unread"] == 0
    assert "operator:" not in cli.run("status").stdout
