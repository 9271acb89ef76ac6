"""Child output as lines: ``Line`` and the splitter that bounds how much of one line is held."""

from __future__ import annotations

from dataclasses import dataclass

LINE_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Line:
    """One line of child output, without its newline. ``truncated``: the rest was dropped."""

    data: bytes
    truncated: bool = False

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class LineSplitter:
    """Splits a byte stream into lines, holding at most ``limit`` bytes of one line."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buf = bytearray()
        self._dropping = False  # the current line was already emitted truncated

    def feed(self, chunk: bytes) -> list[Line]:
        out: list[Line] = []
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._take(chunk[start:nl], out)
            if not self._dropping:
                out.append(Line(bytes(self._buf)))
            self._buf.clear()
            self._dropping = False
            start = nl + 1
        self._take(chunk[start:], out)
        return out

    def flush(self) -> list[Line]:
        if self._dropping or not self._buf:
            return []
        line = Line(bytes(self._buf))
        self._buf.clear()
        return [line]

    def _take(self, piece: bytes, out: list[Line]) -> None:
        if self._dropping or not piece:
            return
        room = self._limit - len(self._buf)
        if len(piece) <= room:
            self._buf += piece
            return
        self._buf += piece[:room]
        out.append(Line(bytes(self._buf), truncated=True))
        self._buf.clear()
        self._dropping = True
