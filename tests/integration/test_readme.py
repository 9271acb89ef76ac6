"""The ``sh`` blocks of README.md and of the docs site, run as written, in order, in one bash
process with ``set -eu``.

The order is README.md first, then each page of ``mkdocs.yml``'s ``nav`` in nav order (its home,
``index.md``, is README.md itself): a page's blocks may use what README.md or an earlier page left
(the demo repository ``~/agentmail-demo``, its agents, the daemon the README started until "The
delivery daemon" stops it). A page that is not in the nav fails ``mkdocs build --strict``
(``tests/integration/test_docs_site.py``), so no page's blocks are left out.

A doc that is tested stays true: any command in an ``sh`` block that fails fails this test. The
shell starts in this checkout (the README's Install block runs ``make venv`` and ``make claude``
here, which are no-ops once done) with a scratch ``HOME``, XDG directories and ``TMUX_TMPDIR`` (a
private tmux server), the venv's ``bin`` first on ``PATH``, and the real, pinned Claude Code CLI
pointed at the loopback API stand-in through ``ANTHROPIC_BASE_URL`` — the variables the README
tells a user to set — and ``TEAM_DB``, an empty PostgreSQL database for "Teams across machines".
The scratch ``~/.claude.json`` pre-answers the first-run dialogs the README tells a user to answer
once by hand.

Reference syntax lives in ``text`` blocks, which are not run. ``&&`` and ``||`` are refused in
``sh`` blocks: ``set -e`` cannot see a failure on their left.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import claude_binary, claude_env, isolated_home
from tests.support.pg import PgDatabases
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.claude, pytest.mark.tmux, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MKDOCS = REPO / "mkdocs.yml"
VENV_BIN = REPO / ".venv" / "bin"
DEMO = "agentmail-demo"  # the README's throw-away repository, under ~
FENCE = re.compile(r"^```(\S*)[ \t]*$")
RUN_TIMEOUT_S = 360  # README and docs, run as written; about 100 s on an idle 2-core machine
NAV_PAGE = re.compile(r"^\s*- (?:[^:]+: )?(\S+\.md)\s*$")  # "- Title: path.md" or "- path.md"


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # of the opening fence, 1-based
    text: str
    source: str = "README.md"


def doc_sources() -> list[Path]:
    """README.md, then the docs pages in ``mkdocs.yml``'s nav order (``index.md`` is README.md)."""
    lines = MKDOCS.read_text().splitlines()
    nav = lines[lines.index("nav:") + 1 :]
    pages = [m.group(1) for line in nav if (m := NAV_PAGE.match(line))]
    return [README, *(REPO / "docs" / p for p in pages if p != "index.md")]


def sh_blocks() -> list[Block]:
    return [
        b
        for path in doc_sources()
        for b in fenced_blocks(path.read_text(), str(path.relative_to(REPO)))
        if b.lang == "sh"
    ]


def fenced_blocks(markdown: str, source: str = "README.md") -> list[Block]:
    blocks: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        blocks.append(Block(opening.group(1), i + 1, "\n".join(lines[i + 1 : end]), source))
        i = end + 1
    return blocks


def script(blocks: list[Block]) -> str:
    parts = ["set -eu", "trap 'echo \"[README] failed: $BASH_COMMAND\" >&2' ERR"]
    for b in blocks:
        parts.append(f'echo "### {b.source} line {b.line} at $(date +%s.%N)" >&2')
        parts.append(b.text)
    parts.append('echo "### end line 0 at $(date +%s.%N)" >&2')
    return "\n".join(parts) + "\n"


def test_every_fence_says_whether_it_runs() -> None:
    blocks = [
        b
        for path in doc_sources()
        for b in fenced_blocks(path.read_text(), str(path.relative_to(REPO)))
    ]
    unlabelled = [
        f"{b.source}:{b.line}" for b in blocks if b.lang not in ("sh", "text", "toml", "json")
    ]
    assert not unlabelled, f"fences need `sh` (run by this test) or `text`: {unlabelled}"
    for b in blocks:
        if b.lang == "sh":
            assert "&&" not in b.text and "||" not in b.text, (
                f"{b.source} line {b.line}: write one command per line; set -e ignores a "
                "failure left of && or ||"
            )
    assert sum(b.lang == "sh" for b in blocks if b.source == "README.md") >= 4
    assert sum(b.lang == "sh" for b in blocks if b.source != "README.md") >= 12


def test_docs_run_after_the_readme_in_nav_order() -> None:
    sources = [str(p.relative_to(REPO)) for p in doc_sources()]
    assert sources[0] == "README.md"
    assert "docs/index.md" not in sources  # the site's home page is README.md itself
    assert sources.index("docs/guides/mail.md") < sources.index("docs/guides/daemon.md")
    assert sources.index("docs/guides/daemon.md") < sources.index("docs/guides/machines.md")
    assert all((REPO / s).is_file() for s in sources)


def test_extractor_runs_exactly_the_sh_blocks() -> None:
    text = "a\n```sh\necho one\n```\n```text\nnot run\n```\n```sh\necho two\n```\n"
    blocks = [b for b in fenced_blocks(text) if b.lang == "sh"]
    assert [(b.line, b.text) for b in blocks] == [(2, "echo one"), (8, "echo two")]


def scratch_env(tmp: Path, home: Path, base_url: str) -> dict[str, str]:
    env = claude_env(home, base_url)
    for key in list(env):
        if key.startswith(("AGENTMAILD_", "XDG_", "GIT_", "VIRTUAL_ENV", "NPM_CONFIG_")):
            del env[key]
    runtime = tmp / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    for name in ("config", "data", "state", "cache"):
        env[f"XDG_{name.upper()}_HOME"] = str(tmp / f"xdg-{name}")
    tmux_dir = tmp / "tmux"
    tmux_dir.mkdir(mode=0o700)
    env.update(
        XDG_RUNTIME_DIR=str(runtime),
        TMUX_TMPDIR=str(tmux_dir),
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="readme",
        GIT_AUTHOR_EMAIL="readme@example.invalid",
        GIT_COMMITTER_NAME="readme",
        GIT_COMMITTER_EMAIL="readme@example.invalid",
    )
    return env


def log_events(stderr: str) -> list[dict[str, Any]]:
    """The daemon's JSON log lines among the README's stderr."""
    events = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return events


def lock_is_free(lock: Path) -> bool:
    """True once no process holds the daemon's store lock (it was released by its exit)."""
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


@contextlib.contextmanager
def cleaned_up(env: dict[str, str], lock: Path) -> Iterator[None]:
    """Whatever the README left behind: its tmux server, and a daemon that outlived bash."""
    try:
        yield
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True, timeout=10)
        if lock.exists() and not lock_is_free(lock):
            stop_daemon(lock)


def stop_daemon(lock: Path) -> None:
    """SIGTERM (it drains and stops its agents), then SIGKILL; the pid is in its lock file."""
    with contextlib.suppress(ValueError, ProcessLookupError):
        pid = int(lock.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        try:
            wait_for(lambda: lock_is_free(lock), 15, "the left-over daemon to stop")
        except AssertionError:
            os.kill(pid, signal.SIGKILL)


def run_readme(env: dict[str, str], text: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run the script; wait for bash itself (the daemon it left running keeps any pipe open)."""
    out_path, err_path = tmp / "readme.stdout", tmp / "readme.stderr"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            ["bash", "-c", text],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # the daemon started with `&` shares this process group
        )
    note = ""
    try:
        proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        note = f"\n[test] README did not finish within {RUN_TIMEOUT_S}s"
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace") + note
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def seconds_per_source(stderr: str) -> dict[str, float]:
    """How long each file's blocks ran, from the ``### SOURCE line N at T`` marks."""
    marks = re.findall(r"^### (\S+) line \d+ at ([\d.]+)$", stderr, re.MULTILINE)
    spent: dict[str, float] = {}
    for (source, start), (_, end) in itertools.pairwise(marks):
        spent[source] = spent.get(source, 0.0) + float(end) - float(start)
    return spent


def stop_team_daemon(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The "Teams across machines" daemon, when the README failed before its ``ctl shutdown``."""
    from agentmaild.control.client import request
    from agentmaild.control.protocol import socket_path_for
    from agentmaild.errors import ControlError
    from agentmaild.store.location import StoreLocation

    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])  # where the README's daemon was
    sock = socket_path_for(StoreLocation.of(env["TEAM_DB"]).local_path)
    if sock.exists():
        with contextlib.suppress(ControlError, OSError):
            request(sock, "shutdown", timeout=10)


def test_readme_commands_run_as_written(
    tmp_path: Path, pg_databases: PgDatabases, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude_binary()  # `make claude` in the README is then a quick check, not an npm install
    blocks = sh_blocks()
    home = tmp_path / "home"
    demo = home / DEMO
    isolated_home(tmp_path, demo)  # the trust / API-key dialogs a user answers once by hand
    lock = demo / ".agentmail" / "mail.db.lock"
    with AnthropicStub("ready") as stub:
        env = scratch_env(tmp_path, home, stub.base_url)
        env["TEAM_DB"] = pg_databases.create(migrated=False)  # "Teams across machines": empty
        with cleaned_up(env, lock):
            try:
                done = run_readme(env, script(blocks), tmp_path)
            finally:
                stop_team_daemon(env, monkeypatch)
            assert done.returncode == 0, (
                f"a README or docs command failed (exit {done.returncode});\n"
                f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-6000:]}"
            )
            wait_for(lambda: lock_is_free(lock), 20, "the README's daemon to have exited")
        # each delivery path really ran: a spawned process, a headless `claude -p`, a tmux paste
    for source, spent in seconds_per_source(done.stderr).items():
        print(f"[docs run] {source}: {spent:.1f} s")  # shown with -s: where the budget goes
    acked = {e.get("agent") for e in log_events(done.stderr) if e.get("event") == "delivery.acked"}
    assert {"demo", "coder", "reviewer", "ui-dev", "far"} <= acked, acked
    turns = [r for r in stub.messages_requests() if "Reply with one word" in r.last_user_text()]
    assert len(turns) >= 2, "the headless and the tmux agent both reach the model"
    assert "first delivery" in (demo / "demo-inbox.jsonl").read_text()
    assert (demo / ".agentmail" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not (home / ".config" / "systemd" / "user" / "agentmaild.service").exists()
    assert "coder handled dlv-" in done.stdout, "the keyless try-out's answer reached planner"
    # every page ran in the demo repository or a directory of its own: no store was made in ~
    assert not (home / ".agentmail").exists(), "a docs block ran outside its directory"
