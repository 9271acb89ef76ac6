"""Process groups: is any live member left, and signalling the whole group."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def group_alive(pgid: int) -> bool:
    """True while any live (non-zombie) process is in the group.

    ``killpg(pgid, 0)`` alone also counts zombies that a non-reaping PID 1 (containers) never
    collects, so on Linux the members found in /proc are checked for state Z/X.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    return any(_live_member(entry, pgid) for entry in proc.iterdir() if entry.name.isdigit())


def _live_member(entry: Path, pgid: int) -> bool:
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rfind(")") + 2 :].split()
    return len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X")


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
