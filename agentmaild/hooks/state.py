"""The hook's small files beside the store: marker files (the mid-turn debounce stamp, the
stop-block counter) and the ``hooks.log`` line writer.

Loaded by ``agentmaild hook`` only for the events and failures that need it, so it is stdlib only.
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

LOG_MAX_BYTES = 1 << 20


def marker_path(db_path: str, agent: str, kind: str) -> str:
    """``<store dir>/hooks/<agent>.<kind>``."""
    store_dir = os.path.dirname(os.path.abspath(db_path))
    return os.path.join(store_dir, "hooks", f"{agent}.{kind}")


def touched_within(path: str, seconds: float) -> bool:
    """True when ``path`` was touched less than ``seconds`` ago: a stat, no write to the store."""
    try:
        return time.time() - os.stat(path).st_mtime < seconds
    except FileNotFoundError:
        return False


def touch(path: str) -> Callable[[], None]:
    def touch() -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a"):
            pass
        os.utime(path)

    return touch


def read_int(path: str) -> int:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_int(path: str, value: int) -> Callable[[], None]:
    def write() -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="ascii") as f:
            f.write(str(value))

    return write


def log_line(
    db: str | None, what: str, *, event: str, agent: str, exc: BaseException | None
) -> None:
    """Append one key=value line to the hook log; never raises (there is nowhere left to report)."""
    from agentmaild.ids import iso_now

    where = ""
    if exc is not None and exc.__traceback__ is not None:
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        where = f" where={os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
    error = f" error={json.dumps(f'{type(exc).__name__}: {exc}')}" if exc is not None else ""
    line = f"{iso_now()} {what} event={event!r} agent={agent!r} pid={os.getpid()}{error}{where}\n"
    for directory in _log_dirs(db):
        try:
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, "hooks.log")
            if os.path.exists(path) and os.path.getsize(path) > LOG_MAX_BYTES:
                os.replace(path, path + ".1")
            with open(path, "a", encoding="utf-8") as f:
                f.write(line)
            return
        except OSError:
            continue


def _log_dirs(db: str | None) -> list[str]:
    dirs = [os.path.join(os.path.dirname(os.path.abspath(db)), "logs")] if db else []
    home = os.path.expanduser("~")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
    return [*dirs, os.path.join(state, "agentmaild")]
