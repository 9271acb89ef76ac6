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
    # given twice, --agent is typer's to read (the last one wins): the read family only
    p, loaded = _loaded(["inbox", "--agent", "x", "--agent", "bob"], tmp_path / "m.db")
    assert p.returncode == 0, p.stderr[-2000:]
    assert loaded & FAMILIES == {"agentmaild.cli.read"}
    p, loaded = _loaded(["agents", "show", "bob"], tmp_path / "m.db")
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


# issue 32's everyday commands (``ctl ping`` with no daemon: its error, exit 1); each runs its
# typer-free body (``hot.argv``): no typer command family, no typer, no pydantic
EVERYDAY = [
    (["send", "--from", "alice", "--to", "bob", "-s", "hi", "-b", "x"], "sending", 0),
    (["--db", "{db}", "send", "--to", "bob", "-s", "hi", "-b", "x", "--json"], "sending", 0),
    (["reply", "{msg}", "--from", "bob", "-b", "ok"], "sending", 0),
    (["inbox", "--agent", "bob"], "read", 0),
    (["--db", "{db}", "inbox", "--agent", "bob", "--unread"], "read", 0),
    (["read", "{msg}"], "read", 0),
    (["ack", "{msg}", "{msg}"], "read", 0),
    (["--db", "{db}", "ack", "{msg}"], "read", 0),
    (["check", "--agent", "bob"], "read", 0),
    (["thread", "{msg}"], "read", 0),
    (["list", "--limit", "20"], "read", 0),
    (["status"], "daemon", 0),
    (["agents", "list"], "agents", 0),
    (["ctl", "ping"], "daemon", 1),
]


def test_everyday_commands_load_their_family_and_no_pydantic(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    for name in ("alice", "bob"):
        assert _loaded(["agents", "add", name, "-c", "builder"], db)[0].returncode == 0
    msg = _loaded(["send", "--from", "alice", "--to", "bob", "-s", "q", "-b", "z"], db)[0]
    assert msg.returncode == 0, msg.stderr[-2000:]
    for argv, _family, code in EVERYDAY:
        words = [w.format(db=db, msg=msg.stdout.strip()) for w in argv]
        p, loaded = _loaded(words, db)
        assert p.returncode == code, (words, p.stderr[-2000:])
        assert not loaded & FAMILIES, words
        assert not {m for m in loaded if m.split(".")[0] in ("typer", "pydantic")}, words


def _probe(spy: str, argv: list[str], db: Path) -> subprocess.CompletedProcess[str]:
    """The console script's entry on ``argv`` in a child process, ``spy`` run first."""
    code = f"{spy}import sys\nsys.argv = {['agentmaild', *argv]!r}\n" + (
        "from agentmaild.hot.entry import main; main()\n"
    )
    env = {**os.environ, "AGENTMAIL_DB": str(db)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=60)  # fmt: skip


def test_only_the_invoked_command_is_built(tmp_path: Path) -> None:
    """``inbox`` (through typer: ``--agent`` given twice) builds its click command and not those
    of ``read``'s other commands: typer reads a command's signature (``get_params_from_function``)
    only to build it."""
    spy = (
        "import sys, typer.main as tm; seen = []; real = tm.get_command_from_info\n"
        "def spy(command_info, **kw):\n"
        "    seen.append(command_info.name); return real(command_info, **kw)\n"
        "tm.get_command_from_info = spy\n"
        "import atexit; atexit.register(lambda: sys.stderr.write('\\nBUILT ' + ' '.join(seen)))\n"
    )
    p = _probe(spy, ["inbox", "--agent", "x", "--agent", "bob"], tmp_path / "m.db")
    assert p.returncode == 1 and "no store at" in p.stderr  # never creates one
    assert p.stderr.rsplit("BUILT ", 1)[-1].split() == ["inbox"]


def test_the_collector_is_back_on_once_the_command_is_known(tmp_path: Path) -> None:
    """``hot.entry`` turns the cyclic collector off while the CLI loads; the command itself
    (``serve`` lives for days) runs with it on."""
    spy = (
        "import atexit, gc, sys; seen = []\n"
        "import agentmaild.cli.lazy as lazy; real = lazy.LazyGroup.resolve_command\n"
        "def spy(self, ctx, args):\n"
        "    seen.append(gc.isenabled()); got = real(self, ctx, args)\n"
        "    seen.append(gc.isenabled()); return got\n"
        "lazy.LazyGroup.resolve_command = spy\n"
        "atexit.register(lambda: sys.stderr.write(f'\\nGC {seen} {gc.isenabled()}'))\n"
    )
    p = _probe(spy, ["agents", "show", "bob"], tmp_path / "m.db")
    assert p.stderr.rsplit("\nGC ", 1)[-1] == "[False, True] True", p.stderr[-2000:]


def test_the_fast_path_runs_its_body_with_the_collector_on(tmp_path: Path) -> None:
    """The everyday commands' path (``hot.everyday``) too: the body runs with the collector on,
    what the imports made frozen out of its walks."""
    spy = (
        "import atexit, gc, sys; seen = []\n"
        "import agentmaild.cli.plain as plain; real = plain.call\n"
        "def spy(fn, kwargs):\n"
        "    seen.append((gc.isenabled(), gc.get_freeze_count() > 1000)); return real(fn, kwargs)\n"
        "plain.call = spy\n"
        "atexit.register(lambda: sys.stderr.write(f'\\nGC {seen}'))\n"
    )
    p = _probe(spy, ["agents", "list"], tmp_path / "m.db")
    assert p.stderr.rsplit("\nGC ", 1)[-1] == "[(True, True)]", p.stderr[-2000:]
