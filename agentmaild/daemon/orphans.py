"""A dead daemon's surviving agent processes: found (by record and by marker) and stopped.

Runs in recovery, under the store lock and before any loop, so nothing is redelivered to an
agent while the process of its interrupted turn still runs. Every target is verified first: a
journalled group by its leader's pid *and* start time (a reused pid is never signalled), a stray
by the scope marker in its environment together with this store's path.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import structlog

from agentmaild.procs.escapes import SCOPE_ENV
from agentmaild.procs.groups import group_alive, signal_group
from agentmaild.procs.pids import all_stats, environ, is_same, signal_same, start_time
from agentmaild.store.records import AgentProc

log = structlog.get_logger(__name__)

_POLL_S = 0.02
_KILL_WAIT_S = 2.0


def recorded_group_runs(row: AgentProc) -> bool:
    """Whether the journalled group still has members, and is still the group that was recorded.

    A group's id is its leader's pid, and the kernel keeps that number reserved while any member
    lives: so when no process holds the pid, live members of the group are the recorded group's
    survivors; when another process holds it (another start time), the group is gone.
    """
    now = start_time(row.pid)
    if now is not None and now != row.start_time:
        return False
    return is_same(row.pid, row.start_time) or group_alive(row.pgid)


@dataclass(frozen=True, slots=True)
class _Target:
    agent: str
    pid: int
    alive: Callable[[], bool]
    send: Callable[[signal.Signals], None]


def _group_target(row: AgentProc) -> _Target:
    def send(sig: signal.Signals) -> None:
        signal_same(row.pid, row.start_time, sig)
        signal_group(row.pgid, sig)

    return _Target(row.agent, row.pid, lambda: recorded_group_runs(row), send)


def _stray_target(agent: str, pid: int, started: str) -> _Target:
    def send(sig: signal.Signals) -> None:
        signal_same(pid, started, sig)

    return _Target(agent, pid, lambda: is_same(pid, started), send)


def _marked(target: str | None, skip: set[int]) -> list[_Target]:
    """Live processes started in a scope of a daemon for the store ``target`` names (their
    environment says so: its ``AGENTMAIL_DB``, a file's path or a DSN)."""
    if target is None:
        return []
    me = os.getpid()
    found = []
    for stat in all_stats():
        if stat.pid == me or not stat.live or stat.pgid in skip:
            continue
        env = environ(stat.pid)
        if SCOPE_ENV in env and env.get("AGENTMAIL_DB") == target:
            found.append(_stray_target(env.get("AGENTMAIL_AGENT", "?"), stat.pid, stat.start_time))
    return found


async def stop_orphans(
    rows: list[AgentProc], store_named: str | None, kill_grace_s: float
) -> list[AgentProc]:
    """SIGTERM every survivor (whole groups), SIGKILL what is left after the grace; wait.

    Returns the rows whose group is gone (the caller forgets them); a group that outlived
    SIGKILL (another user's, uninterruptible sleep) keeps its row.
    """
    groups = [_group_target(r) for r in rows if recorded_group_runs(r)]
    targets = groups + _marked(store_named, skip={t.pid for t in groups})
    if targets:
        for target in targets:
            target.send(signal.SIGTERM)
        with anyio.move_on_after(kill_grace_s):
            await _all_gone(targets)
        left = [t for t in targets if t.alive()]
        for target in left:
            target.send(signal.SIGKILL)
        with anyio.move_on_after(_KILL_WAIT_S):
            await _all_gone(left)
        for target in targets:
            log.warning("daemon.orphan_stopped", agent=target.agent, pid=target.pid,
                        killed=target in left, gone=not target.alive())
    return [r for r in rows if not recorded_group_runs(r)]


async def _all_gone(targets: list[_Target]) -> None:
    # Not our children: no exit event reaches us, so poll (bounded by the caller).
    while any(t.alive() for t in targets):  # noqa: ASYNC110
        await anyio.sleep(_POLL_S)
