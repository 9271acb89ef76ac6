"""Typer's value coercion without pydantic (``agentmaild.cli.coercion``): plain values convert
as typer's adapters convert them, and every refused value gets typer's own message and exit 2,
from typer's own adapter (built only then)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ENTRY = (
    "import atexit, sys; sys.argv[0] = 'agentmaild'; "
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sys.modules) + '\\n')); "
    "from agentmaild.hot.entry import main; main()"
)


def _run(argv: list[str], db: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {**os.environ, "AGENTMAIL_DB": str(db)}
    p = subprocess.run([sys.executable, "-c", ENTRY, *argv],
                       capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    out, _, mods = p.stderr.rpartition("\nMODULES ")
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout, out), set(mods.split())


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "m.db"
    assert _run(["agents", "add", "bob", "-c", "builder"], db)[0].returncode == 0
    for i in range(3):
        p, _ = _run(["send", "--to", "bob", "-s", f"s{i}", "-b", "x"], db)
        assert p.returncode == 0, p.stderr
    return db


def test_plain_values_convert_without_pydantic(tmp_path: Path) -> None:
    db = _store(tmp_path)
    for limit, rows in (("2", 2), ("+1", 1), ("007", 3)):
        p, mods = _run(["list", "--limit", limit, "--json"], db)
        assert p.returncode == 0, p.stderr
        assert len(json.loads(p.stdout)["messages"]) == rows
        assert "pydantic" not in mods


def test_refused_values_keep_typers_messages(tmp_path: Path) -> None:
    db = _store(tmp_path)
    cases = {
        "0": "Input should be greater than or equal to 1",
        "-3": "Input should be greater than or equal to 1",
        "x": "Input should be a valid integer, unable to parse string as an integer",
        "1.5": "Input should be a valid integer, unable to parse string as an integer",
    }
    for limit, why in cases.items():
        p, mods = _run(["list", "--limit", limit], db)
        assert p.returncode == 2, p.stderr
        assert p.stderr.strip() == (
            f"error: Invalid value for '--limit' / '-n': {why} (see 'agentmaild list --help')"
        )
        assert "pydantic" in mods  # typer's adapter said it
        p, _ = _run(["--json", "list", "--limit", limit], db)
        assert p.returncode == 2
        error = json.loads(p.stdout)["error"]
        assert error["code"] == "usage" and why in error["message"]


def test_missing_values_keep_their_usage_errors(tmp_path: Path) -> None:
    db = _store(tmp_path)
    for argv, says in (
        (["ack"], "Missing argument 'ID...'."),
        (["inbox"], "Missing option '--agent' / '-a'."),
        (["inbox", "--agent"], "Option '--agent' requires an argument."),
    ):
        p, _ = _run(argv, db)
        assert p.returncode == 2, argv
        assert says in p.stderr, p.stderr


EVERYDAY = ["send", "reply", "inbox", "read", "ack", "check", "thread", "list", "status",
            "agents list", "ctl"]  # fmt: skip


def test_everyday_help_and_unknown_options_are_unchanged(tmp_path: Path) -> None:
    """Each everyday command's ``--help`` (exit 0, its usage line) and an unknown option (exit
    2, click's one line and the help hint), as before the CLI loaded lazily."""
    db = tmp_path / "m.db"
    for command in EVERYDAY:
        words = command.split()
        p, _ = _run([*words, "--help"], db)
        assert p.returncode == 0, (command, p.stderr)
        assert f"Usage: agentmaild {command} [OPTIONS]" in p.stdout, p.stdout[:300]
        p, _ = _run([*words, "--bogus"], db)
        assert p.returncode == 2, (command, p.stderr)
        hint = " (Possible options: --body)" if command in ("send", "reply") else ""
        assert p.stderr.strip() == (
            f"error: No such option: --bogus{hint} (see 'agentmaild {command} --help')"
        ), p.stderr
        assert not db.exists()  # neither asked for help nor refused a word made a store
