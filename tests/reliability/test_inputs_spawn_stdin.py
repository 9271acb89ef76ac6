"""A spawn agent that exits 0 without reading its stdin line is never acked.

Before, whether ``true`` was caught depended on a race (did our write land before the child
exited?): 4 of 30 attempts were judged failed, the rest acked mail nobody read. Each agent here
gets one message and ``max_attempts = 30`` under a real daemon: the non-readers must fail all 30
attempts (the batch becomes a dead letter, the message stays unread, the error says why), while
agents that read their line — to the end, or just the one line — are acked.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.procs.scope import open_child
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import DaemonProc, add_spawn, assert_sound, wait_for

pytestmark = pytest.mark.timeout(120)

ATTEMPTS = 30
NON_READERS = {
    "true": ("true",),
    "sh-exit0": ("sh", "-c", "exit 0"),
    "reads-a-byte": (sys.executable, "-S", "-c", "import os; os.read(0, 1)"),  # not all of it
}
READERS = {
    "cat": ("sh", "-c", "cat >/dev/null"),
    "sh-read": ("sh", "-c", "read -r line && test -n \"$line\""),  # byte by byte, to the newline
    "py-readline": (sys.executable, "-S", "-c", "import sys; assert sys.stdin.readline()"),
}


def _store(db: Path) -> SqliteMailStore:
    return SqliteMailStore(db)


def test_exit_0_without_reading_is_never_acked(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    store = _store(db)
    store.add_agent(Agent(name="lead", capability="lead"))
    for name, command in {**NON_READERS, **READERS}.items():
        add_spawn(store, name, command)
        Mailer(store).send(sender="lead", to=name, subject="task", body=f"for {name}")
    store.close()
    d = daemons(env={"AGENTMAILD_DAEMON_MAX_ATTEMPTS": str(ATTEMPTS)})

    def dead_letters() -> dict[str, object]:
        s = _store(db)
        try:
            return {name: s.dead_letters(name) for name in NON_READERS}
        finally:
            s.close()

    wait_for(lambda: all(dead_letters().values()), 90, "every non-reader to dead-letter")
    s = _store(db)
    try:
        for name in NON_READERS:
            [dead] = s.dead_letters(name)
            assert dead.attempts == ATTEMPTS, (name, dead)
            assert dead.last_error and "without reading its stdin" in dead.last_error, dead
            assert [m.read for m in s.inbox(name)] == [False], f"{name}'s mail was acked"
        for name in READERS:
            assert [m.read for m in s.inbox(name)] == [True], f"{name} read its line: not acked"
            assert not s.dead_letters(name)
    finally:
        s.close()
    acked = {e["agent"] for e in d.events("delivery.acked")}
    assert acked == set(READERS), acked
    assert d.stop() == 0
    assert_sound(db)


# -- the pipe itself: bigger than its buffer, so a plain write would block --------------------

BIG = b"x" * (1 << 20) + b"\n"  # 1 MiB: 16 times a Linux pipe's default capacity


async def test_a_child_that_never_reads_cannot_block_the_writer() -> None:
    with anyio.fail_after(20):
        async with open_child(["sleep", "0.3"], own_stdin=True, kill_grace_s=1) as child:
            sent = await child.send(BIG)  # returns when the child exits, not never
            await child.close_stdin()
            done = await child.wait()
            assert (sent, done.returncode) == (False, 0)
            assert child.stdin_unread() == len(BIG)


async def test_a_child_that_reads_everything_leaves_nothing_unread() -> None:
    with anyio.fail_after(20):
        async with open_child(["sh", "-c", "cat >/dev/null"], own_stdin=True) as child:
            assert await child.send(BIG)
            await child.close_stdin()
            assert (await child.wait()).returncode == 0
            assert child.stdin_unread() == 0


async def test_a_child_that_reads_half_leaves_the_rest_counted() -> None:
    reader = "import os, sys; n = 0\nwhile n < 1000: n += len(os.read(0, 1000 - n))"
    with anyio.fail_after(20):
        async with open_child([sys.executable, "-S", "-c", reader], own_stdin=True) as child:
            await child.send(b"y" * 3000)
            await child.close_stdin()
            assert (await child.wait()).returncode == 0
            assert child.stdin_unread() == 2000
