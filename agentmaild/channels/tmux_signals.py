"""The tmux channel's busy signals: one ``Probe`` of them all, and the readers of the two that live
outside the pane (the turn state agentmaild's hooks recorded, Claude Code's session file), with
the hooks' record that a pasted delivery was submitted (``submitted``) and the store they are in.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agentmaild.channels.tmux_screen import Composer
from agentmaild.errors import StoreError
from agentmaild.store.kinds import open_port
from agentmaild.store.location import StoreLocation
from agentmaild.store.ports import Port

DEFAULT_STALE_S = 900.0
_HOOK_BUSY = frozenset({"busy", "waiting"})


@dataclass(slots=True)
class Probe:
    """One look at every busy signal; ``reasons`` lists the ones that say busy."""

    pane_pid: int
    composer: Composer | None
    hook_state: str | None = None
    session_status: str | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return bool(self.reasons)

    def signals(self) -> dict[str, Any]:
        return {
            "hook_state": self.hook_state,
            "session_status": self.session_status,
            "composer": None
            if self.composer is None
            else ("empty" if not self.composer.text else "text"),
            "busy_reasons": list(self.reasons),
        }


def hook_says_busy(
    state: str | None, at: float | None, status: str | None, status_at: float | None, stale_s: float
) -> bool:
    """The hook-recorded turn state says busy, unless it is stale or Claude's session file
    reported ``idle`` after it."""
    if state not in _HOOK_BUSY or at is None:
        return False
    if time.time() - at > stale_s:
        return False  # a hook that never reported the turn's end must not block forever
    # Esc-interrupted turns fire no Stop hook; Claude's own later "idle" wins.
    return not (status == "idle" and status_at is not None and status_at > at)


def turn_state(port: Port, agent: str) -> tuple[str | None, float | None]:
    """The turn state agentmaild's hooks recorded for ``agent``, and when (epoch s)."""
    state, at = port.turn(agent)
    if state is None:
        return None, None
    return state, _instant(at)


def _instant(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def session_file(home: Path, pane_pid: int) -> tuple[str | None, float | None]:
    """``status`` and its time (epoch s) from the Claude session file of the pane's process or a
    descendant of it; (None, None) when there is none."""
    folder = home / ".claude" / "sessions"
    try:
        names = [p for p in folder.iterdir() if p.suffix == ".json" and p.stem.isdigit()]
    except OSError:
        return None, None
    for path in names:
        if int(path.stem) == pane_pid or _descends(int(path.stem), pane_pid):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError, RecursionError):
                continue
            status = data.get("status") if isinstance(data, dict) else None
            if isinstance(status, str):
                at = data.get("statusUpdatedAt") or data.get("updatedAt")
                return status, at / 1000 if isinstance(at, int | float) else None
    return None, None


def _descends(pid: int, ancestor: int, depth: int = 32) -> bool:
    """Walk ``/proc`` parents (Linux); elsewhere only the pane's own pid matches."""
    for _ in range(depth):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False


def submitted(port: Port, delivery_id: str) -> bool:
    """The UserPromptSubmit hook recorded ``delivery_id``: its paste was submitted."""
    return port.delivery_seen(delivery_id)


def open_store_port(location: StoreLocation) -> Port:
    """The store's port for the hooks' records (``TmuxChannel`` opens it on first use)."""
    port = open_port(location)
    if port is None:
        raise StoreError(f"no store at {location.shown}")
    return port
