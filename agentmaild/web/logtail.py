"""The agent page's log tail: the end of the file ``agentmaild logs`` reads, bounded and visible.

At most ``TAIL_BYTES`` from the end of ``procs.logfiles.log_path`` (so a single huge line costs no
more than a short one), at most ``TAIL_LINES`` lines; control characters are spelled out
(``render.framing.visible``, as on a terminal) and the template escapes the rest: an agent's
output is shown, never obeyed. ``LogTails.changed`` stats each watched file and reads only the
ones that moved.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentmaild.procs.logfiles import log_path
from agentmaild.render.framing import visible

TAIL_BYTES = 32_768
TAIL_LINES = 200


def read_tail(path: Path) -> tuple[list[str], bool]:
    """(the last lines, whether the file exists)."""
    try:
        with path.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            start = max(0, end - TAIL_BYTES)
            f.seek(start)
            data = f.read(end - start)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return [], False
    lines = data.decode("utf-8", "replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # the first is cut at the window's edge
    return [visible(line) for line in lines[-TAIL_LINES:]], True


class LogTails:
    """The logs the open agent pages watch: ``changed(agent)`` → new lines, or None."""

    def __init__(self, store_path: Path) -> None:
        self._store_path = store_path
        self._seen: dict[str, tuple[int, int, int] | None] = {}

    def path(self, agent: str) -> Path:
        return log_path(self._store_path, agent)

    def changed(self, agent: str, fresh: bool) -> tuple[list[str], bool] | None:
        path = self.path(agent)
        try:
            st = path.stat()
            ident: tuple[int, int, int] | None = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            ident = None
        if not fresh and agent in self._seen and self._seen[agent] == ident:
            return None
        self._seen[agent] = ident
        return read_tail(path)

    def forget(self, keep: set[str]) -> None:
        for agent in [a for a in self._seen if a not in keep]:
            del self._seen[agent]
