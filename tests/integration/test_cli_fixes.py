"""Issue 32's small CLI items, each against the real CLI (and a real daemon for ``ctl``): ``ctl``
prints text unless ``--json``; a bad ``--priority`` is a usage error (exit 2); ``hooks install``
for an unregistered agent warns, whatever the vendor; ``agents show`` prints no ``None``;
``agents list`` has a header; ``--help`` shows no ``<bool>`` for flags; ``status`` names its
turn column for what it is; the npm installs print no spinner."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import FAST, DaemonProc, base_env, daemon_factory

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def daemons(db: Path, tmp_path: Path) -> Iterator[Callable[..., DaemonProc]]:
    with daemon_factory(db, tmp_path, defaults=FAST, text=True) as make:
        yield make


def run(tmp_path: Path, *args: str, db: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = base_env(tmp_path, {"HOME": str(tmp_path / "home")})
    more = ["--db", str(db)] if db is not None else []
    return subprocess.run([sys.executable, "-m", "agentmaild", *more, *args], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip


def test_ctl_prints_text_unless_json(store: SqliteMailStore, daemons: Callable[..., DaemonProc]
                                     ) -> None:  # fmt: skip
    d = daemons()
    text = d.cli("ctl", "ping")
    assert text.returncode == 0 and text.stdout.startswith("pong: yes\n"), text.stdout
    assert "{" not in text.stdout and f"pid: {d.proc.pid}\n" in text.stdout  # type: ignore[union-attr]
    assert d.cli("ctl", "agents").stdout == "agents: -\n"  # bob pulls: no delivery loop
    as_json = json.loads(d.cli("ctl", "ping", "--json").stdout)
    assert as_json["ok"] is True and as_json["result"]["pong"] is True


@pytest.mark.parametrize(
    "argv",
    [
        ["send", "--to", "bob", "-s", "hi", "-p", "huge"],  # the fast send
        ["send", "--to", "bob", "-s", "hi", "-p", "huge", "--payload", "{}"],  # typer's
        ["reply", "{id}", "-b", "x", "--priority", "huge"],
    ],
)
def test_an_unknown_priority_is_a_usage_error(
    store: SqliteMailStore, db: Path, tmp_path: Path, argv: list[str]
) -> None:
    mid = Mailer(store).send(sender="bob", to="operator", subject="q", body="x").ids[0]
    argv = [mid if a == "{id}" else a for a in argv]
    done = run(tmp_path, *argv, db=db)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: priority: unknown 'huge'; one of low, normal, high, urgent\n"
    as_json = run(tmp_path, *argv, "--json", db=db)
    assert as_json.returncode == 2 and json.loads(as_json.stdout)["error"]["code"] == "usage"
    assert len(store.list_messages()) == 1  # nothing was sent


@pytest.mark.parametrize("vendor", ["gemini", "claude"])
def test_hooks_for_an_unregistered_agent_warn(
    store: SqliteMailStore, db: Path, tmp_path: Path, vendor: str
) -> None:
    done = run(tmp_path, "hooks", "install", "--vendor", vendor, "--agent", "analyst", db=db)
    assert done.returncode == 0, done.stderr
    assert "warning: agent 'analyst' is unknown (it is not registered in" in done.stderr
    assert "installed: agentmaild" in done.stdout
    known = run(tmp_path, "hooks", "install", "--vendor", vendor, "--agent", "bob", db=db)
    assert known.returncode == 0 and "warning" not in known.stderr


def test_agents_show_and_list_read_as_text(store: SqliteMailStore, db: Path, tmp_path: Path
                                           ) -> None:  # fmt: skip
    store.add_agent(Agent(name="w1", capability="builder", channel="spawn", command=("tee", "x")))
    shown = run(tmp_path, "agents", "show", "bob", db=db)
    assert shown.returncode == 0 and "None" not in shown.stdout
    assert "parent: -\n" in shown.stdout and "capability: lead\n" in shown.stdout
    listed = run(tmp_path, "agents", "list", db=db).stdout.splitlines()
    assert listed[0].split() == ["NAME", "CAPABILITY", "STATE", "CHANNEL", "COMMAND", "OR", "PANE"]
    assert listed[2].split()[:5] == ["w1", "builder", "booting", "spawn", "tee"]
    assert listed[0].index("CHANNEL") == listed[2].index("spawn")  # the columns line up


@pytest.mark.parametrize("argv", [[], ["inbox"], ["agents", "add"], ["wait"]])
def test_help_shows_no_type_for_flags(tmp_path: Path, argv: list[str]) -> None:
    done = run(tmp_path, *argv, "--help")
    assert done.returncode == 0 and "--json" in done.stdout
    assert "<bool>" not in done.stdout


def test_status_names_the_turn_column(store: SqliteMailStore, db: Path, tmp_path: Path) -> None:
    store.set_agent_state("bob", "working")
    lines = run(tmp_path, "status", db=db).stdout.splitlines()
    header = next(line for line in lines if line.startswith("AGENT"))
    row = next(line for line in lines if line.startswith("bob "))
    assert "BUSY" not in header and "IN TURN" in header
    assert row[header.index("MEMBER") :].split()[0] == "busy"
    assert row[header.index("IN TURN") :].split()[0] == "no"


def test_the_npm_installs_print_no_spinner() -> None:
    for script in ("install-claude.sh", "install-vendors.sh"):
        installs = [line for line in (ROOT / "scripts" / script).read_text().splitlines()
                    if "npm install" in line]  # fmt: skip
        assert installs and all("--no-progress" in line for line in installs), script


def test_a_new_store_is_announced_once(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "mail.db"
    first = run(tmp_path, "agents", "add", "lead", "-c", "lead", db=db)
    assert first.returncode == 0 and first.stdout == "added lead\n"
    assert first.stderr == f"agentmaild: created a new store at {db}\n"
    again = run(tmp_path, "agents", "add", "w1", "-c", "builder", db=db)
    assert again.returncode == 0 and again.stderr == ""
    sent = run(tmp_path, "send", "--to", "operator", "-s", "hi", db=tmp_path / "other.db")
    assert sent.returncode == 0
    assert sent.stderr == f"agentmaild: created a new store at {tmp_path / 'other.db'}\n"
    looked = run(tmp_path, "inbox", "--agent", "lead", db=tmp_path / "none.db")
    assert looked.returncode == 1 and "created" not in looked.stderr  # looking never creates


@pytest.mark.parametrize(
    ("preset", "hint"),
    [("codex", "npm install -g @openai/codex"), ("claude", "npm install -g @anthropic-ai/claude")],
)
def test_a_preset_without_its_executable_warns_with_the_install_hint(
    store: SqliteMailStore, db: Path, tmp_path: Path, preset: str, hint: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = base_env(tmp_path, {"PATH": f"{bin_dir}:/usr/bin:/bin"})
    argv = [sys.executable, "-m", "agentmaild", "--db", str(db), "agents", "add"]
    flags = ["-c", "builder", "--channel", "spawn", "--preset", preset]
    missing = subprocess.run([*argv, "w1", *flags], env=env, capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    assert missing.returncode == 0 and missing.stdout == "added w1\n"
    assert missing.stderr.startswith(f"warning: --preset {preset}: no '{preset}' executable")
    assert hint in missing.stderr and store.get_agent("w1") is not None
    exe = bin_dir / preset
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    found = subprocess.run([*argv, "w2", *flags], env=env, capture_output=True, text=True,
                           timeout=60)  # fmt: skip
    assert found.returncode == 0 and found.stderr == ""


@pytest.mark.parametrize("command", ["list", "deliveries"])
def test_a_huge_limit_is_a_usage_error(store: SqliteMailStore, db: Path, tmp_path: Path,
                                       command: str) -> None:  # fmt: skip
    """It reached SQLite as an integer too large for it: a traceback, exit 1."""
    huge = "99999999999999999999999"
    done = run(tmp_path, command, "--limit", huge, db=db)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "--limit" in done.stderr
    answer = json.loads(run(tmp_path, "--json", command, "--limit", huge, db=db).stdout)
    assert answer["error"]["code"] == "usage"
    assert run(tmp_path, command, "--limit", "100000", db=db).returncode == 0
