"""Processes that escape their scope's process group (setsid, double fork): found, stopped, reaped.

Killing a process group misses a descendant that moved to a new session or group. Three things
tie such a process back to the scope that started it:

- every scope's environment carries ``AGENTMAIL_SCOPE=<token>``, inherited by all descendants
  that do not scrub their environment (read back from ``/proc/<pid>/environ``);
- while its parent chain is intact, its ancestry reaches the scope's leader;
- a process that stayed in the leader's session has the leader's pid as its session id.

On Linux the daemon is made a child subreaper, so an escaped process whose parent exits is
re-parented to the daemon (not to init): the daemon must then reap it, but only it — pids of
children anyio waits on are never waited for here. Without /proc (macOS, BSD) none of this is
available and only the process group is stopped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import secrets
import signal
import sys

import anyio
import anyio.to_thread

from agentmaild.procs.cgroups import CgroupScope
from agentmaild.procs.pids import (
    ProcStat,
    all_stats,
    environ,
    has_proc,
    is_same,
    read_stat,
    reap,
    signal_same,
)

SCOPE_ENV = "AGENTMAIL_SCOPE"
_PR_SET_CHILD_SUBREAPER = 36
_POLL_S = 0.02
_KILL_WAIT_S = 2.0  # after SIGKILL a process is gone within scheduling delay; bound it anyway


class _Reaper:
    enabled = False  # set once this process became a child subreaper


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux ``prctl``); False where that is unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _Reaper.enabled = int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
    return _Reaper.enabled


def new_token() -> str:
    """A scope's marker value: this daemon's pid and a random part, unique per scope."""
    return f"{os.getpid()}-{secrets.token_hex(6)}"


def find_escaped(
    stats: list[ProcStat], leader: int, token: str, *, tree: bool = True
) -> dict[int, str]:
    """Live processes in ``stats`` that belong to ``leader``'s scope but not to its group.

    Returns pid → start time. ``tree``: also by session and ancestry (only while the leader is
    unreaped, so its pid is still its own); else by the marker alone. As a subreaper every
    descendant's parent chain ends at the leader or at us, so only those environments are read;
    otherwise an escapee may hang under init and every readable environment is.
    """
    me = os.getpid()
    by_pid = {s.pid: s for s in stats}
    found: dict[int, str] = {}
    for stat in stats:
        if stat.pid in (leader, me) or not stat.live or stat.pgid == leader:
            continue
        root = _root(stat, leader, me, by_pid)
        if tree and (stat.sid == leader or root == leader):
            found[stat.pid] = stat.start_time
        elif (root == me or not _Reaper.enabled) and environ(stat.pid).get(SCOPE_ENV) == token:
            found[stat.pid] = stat.start_time
    return found


def _root(stat: ProcStat, leader: int, me: int, by_pid: dict[int, ProcStat]) -> int | None:
    """``leader`` or ``me`` when the parent chain reaches it, else None."""
    seen: set[int] = set()
    current: ProcStat | None = stat
    while current is not None and current.pid not in seen:
        if current.ppid in (leader, me):
            return current.ppid
        seen.add(current.pid)
        current = by_pid.get(current.ppid)
    return None


def escaped_children(stats: list[ProcStat], token: str) -> dict[int, str]:
    """Live children of this process (re-parented to it) that carry the scope marker ``token``."""
    me = os.getpid()
    return {
        s.pid: s.start_time
        for s in stats
        if s.ppid == me and s.live and environ(s.pid).get(SCOPE_ENV) == token
    }


def reap_orphan_zombies(stats: list[ProcStat]) -> int:
    """Reap the zombie children in ``stats`` that can only have been re-parented to us.

    An escapee that exits before anyone noticed it leaves a zombie no marker can name (a zombie
    has no environment). Every child this process forks itself either leads its own session
    (``open_child``) or stays in ours (``anyio.run_process``), and their waiters need their exit
    status; a zombie child in another session that it does not lead was forked by someone else.
    """
    me, own_sid = os.getpid(), os.getsid(0)
    reaped = 0
    for stat in stats:
        if stat.ppid == me and not stat.live and stat.sid not in (stat.pid, own_sid):
            reaped += reap(stat.pid)
    return reaped


async def stop_escaped(procs: dict[int, str], kill_grace_s: float) -> tuple[list[int], bool]:
    """SIGTERM each (pid, start time) still alive, SIGKILL what is left after the grace, reap.

    Returns the pids signalled and whether SIGKILL was needed.
    """
    hit = [pid for pid, started in procs.items() if signal_same(pid, started, signal.SIGTERM)]
    killed = False
    if hit:
        with anyio.move_on_after(kill_grace_s):
            await _gone(procs)
        left = [pid for pid in hit if signal_same(pid, procs[pid], signal.SIGKILL)]
        if left:
            killed = True
            with anyio.move_on_after(_KILL_WAIT_S):
                await _gone(procs)
    reap_children(procs)
    return hit, killed


async def _gone(procs: dict[int, str]) -> None:
    # Not our children (or not waitable without stealing): no event exists, poll bounded.
    while any(is_same(pid, started) for pid, started in procs.items()):  # noqa: ASYNC110
        await anyio.sleep(_POLL_S)


def reap_children(procs: dict[int, str]) -> None:
    """Collect the zombies among ``procs`` (pid → start time) re-parented to this process.

    The start time is checked on the zombie too: a pid reused by a child anyio waits on is left.
    """
    me = os.getpid()
    for pid, started in procs.items():
        stat = read_stat(pid)
        if stat is not None and not stat.live and stat.ppid == me and stat.start_time == started:
            reap(pid)


class EscapeWatch:
    """One scope's escaped processes: looked for while it runs, stopped and reaped at its end.

    Each look is one walk of /proc (a few milliseconds for a few hundred processes): one at the
    scope's end, one before it if the leader still runs, and one every ``scan_s`` meanwhile.
    """

    def __init__(
        self, leader: int, token: str, *, scan_s: float = 5.0, cgroup: CgroupScope | None = None
    ) -> None:
        self.leader = leader
        self.cgroup = cgroup
        self.token = token
        self.scan_s = scan_s
        self.enabled = has_proc()
        self.seen: dict[int, str] = {}  # includes those that already exited: reaped at the end

    def snapshot(self) -> None:
        """While the leader runs: what belongs to the scope by marker, session and ancestry."""
        if self.enabled:
            self.seen.update(find_escaped(list(all_stats()), self.leader, self.token))

    async def run(self) -> None:
        """Notice re-parented escapees while the scope runs, so they are reaped even if they
        exit on their own before the scope ends (a subreaper that never waits keeps zombies)."""
        while self.enabled:
            await anyio.sleep(self.scan_s)
            stats = list(all_stats())
            self.seen.update(escaped_children(stats, self.token))
            reap_orphan_zombies(stats)

    async def stop(self, kill_grace_s: float) -> tuple[list[int], bool]:
        """Stop every escapee still alive (looked up once more, by marker, and every process
        left in the scope's cgroup, whatever it did to its environment), then reap."""
        if not self.enabled:
            return [], False
        stats = list(all_stats())
        self.seen.update(find_escaped(stats, self.leader, self.token, tree=False))
        if self.cgroup is not None:
            self.seen.update(self.cgroup.members())
        reap_orphan_zombies(stats)
        stopped = await stop_escaped(self.seen, kill_grace_s)
        if self.cgroup is not None and not self.cgroup.remove():
            # a member that appeared after the look: no cgroup outlives its scope
            await anyio.to_thread.run_sync(self.cgroup.kill)
        return stopped
