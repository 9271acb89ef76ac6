"""Process identity: a pid plus its start time, read from /proc on Linux (``ps`` elsewhere).

A bare pid is never enough to signal a process the daemon did not just fork: pids are reused. A
``(pid, start_time)`` pair names one process for its whole life, so every signal sent to a process
found in the store or in /proc is sent only after the pair was checked — through a pidfd where
the platform has one, so the check and the signal cannot straddle a pid reuse.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

_PROC = "/proc"
_PS_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` the daemon uses."""

    pid: int
    state: str  # R, S, D, Z, X, …
    ppid: int
    pgid: int
    sid: int
    start_time: str  # field 22: clock ticks after boot

    @property
    def live(self) -> bool:
        return self.state not in ("Z", "X")


@functools.cache
def has_proc() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


def _read(path: str) -> bytes | None:
    # os-level reads: a /proc walk does one per process, and pathlib's overhead triples it.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat line, parsed; None when it is gone (or there is no /proc)."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 20:
        return None
    return ProcStat(
        pid=pid,
        state=fields[0].decode(),
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        sid=int(fields[3]),
        start_time=fields[19].decode(),
    )


def start_time(pid: int) -> str | None:
    """What tells this process from a later one with the same pid; None when it is gone."""
    if has_proc():
        stat = read_stat(pid)
        return stat.start_time if stat is not None else None
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=_PS_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = " ".join(out.stdout.split())
    return text or None


def is_same(pid: int, started: str) -> bool:
    """True while ``pid`` is alive (not a zombie) and is the process that started at ``started``."""
    if has_proc():
        stat = read_stat(pid)
        return stat is not None and stat.live and stat.start_time == started
    return start_time(pid) == started


def all_stats() -> Iterator[ProcStat]:
    """Every process /proc shows (nothing where there is no /proc)."""
    if not has_proc():
        return
    for name in os.listdir(_PROC):
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None:
                yield stat


def environ(pid: int) -> dict[str, str]:
    """The environment ``pid`` was started with; empty when unreadable (another user, a zombie)."""
    raw = _read(f"/proc/{pid}/environ")
    env: dict[str, str] = {}
    for item in (raw or b"").split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def signal_same(pid: int, started: str, sig: signal.Signals) -> bool:
    """Send ``sig`` to ``pid`` only if it is still the process that started at ``started``."""
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    if pidfd_open is None or send is None:
        if not is_same(pid, started):
            return False
        return _kill(pid, sig)
    try:
        fd = pidfd_open(pid)
    except OSError:
        return False
    try:
        # The pidfd pins the process: checked after opening, the check holds for the signal.
        if not is_same(pid, started):
            return False
        send(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _kill(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except OSError:
        return False
    return True


def reap(pid: int) -> bool:
    """Collect ``pid``'s exit status if it is a zombie child of ours; never blocks.

    Only for processes the daemon did not fork itself (re-parented to it as subreaper): for a
    child anyio waits on, this would steal the exit status its waiter needs.
    """
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG) is not None
    except ChildProcessError:
        return False
