"""The root command's lazy group (``agentmaild.cli.lazy``): a command loads its own module and
not the others', ``--help`` still lists every command in the registry's order, and a mistyped
command still gets typer's suggestion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentmaild.cli.lazy import COMMANDS

FAMILIES = {f"agentmaild.cli.{m}" for m in COMMANDS.values()}


# the console script's entry, reporting the modules loaded when the process exits
ENTRY = (
    "import atexit, sys; sys.argv[0] = 'agentmaild'; "
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sys.modules) + '\\n')); "
    "from agentmaild.hot.entry import main; main()"
)


def _loaded(argv: list[str], db: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    env = {**os.environ, "AGENTMAIL_DB": str(db)}
    p = subprocess.run([sys.executable, "-c", ENTRY, *argv],
                       capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    line = p.stderr.rsplit("MODULES ", 1)[-1]
    return p, set(line.split())


def test_a_command_loads_only_its_family(tmp_path: Path) -> None:
    p, loaded = _loaded(["agents", "add", "bob", "-c", "builder"], tmp_path / "m.db")
    assert p.returncode == 0, p.stderr[-2000:]
    assert loaded & FAMILIES == {"agentmaild.cli.agents"}
    p, loaded = _loaded(["inbox", "--agent", "bob"], tmp_path / "m.db")
    assert p.returncode == 0, p.stderr[-2000:]
    assert loaded & FAMILIES == {"agentmaild.cli.read"}
    p, loaded = _loaded(["agents", "list"], tmp_path / "m.db")
    assert p.returncode == 0 and "bob" in p.stdout
    assert loaded & FAMILIES == {"agentmaild.cli.agents"}


def test_help_lists_every_command_in_order(tmp_path: Path) -> None:
    p, loaded = _loaded(["--help"], tmp_path / "m.db")
    assert p.returncode == 0
    assert loaded >= FAMILIES
    rows = [line.strip("│ ").split(" ")[0] for line in p.stdout.splitlines()]
    listed = [w for w in rows if w in COMMANDS]
    assert listed == list(COMMANDS)


def test_a_typo_is_still_suggested(tmp_path: Path) -> None:
    p, loaded = _loaded(["sedn"], tmp_path / "m.db")
    assert p.returncode == 2
    assert "No such command 'sedn'. Did you mean 'send'?" in p.stderr
    assert not loaded & FAMILIES
