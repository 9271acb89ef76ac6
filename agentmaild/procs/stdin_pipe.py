"""A child's stdin pipe whose both ends we keep, so "did it read its input?" has an answer.

With an ordinary pipe the answer is a race: a child that exits without reading may exit before
or after our write lands, and only the "after" case shows (as EPIPE). Here the parent keeps a
copy of the read end, so the pipe outlives the child and the bytes it never read stay in it;
after the child exited, ``FIONREAD`` on that read end counts them. Linux and macOS both answer
``FIONREAD`` on a pipe's read end (macOS reports 0 on the write end, hence the kept read end).

The price of holding the read end is that writes never fail with EPIPE: a child that stops
reading would block a plain write forever once the pipe is full. So the write end is
non-blocking and each wait for room also ends when the child exits.
"""

from __future__ import annotations

import array
import fcntl
import os
import termios

import anyio


class OwnedStdin:
    """Both ends of one child's stdin pipe: ``read_fd`` goes to the child, writes go in here."""

    def __init__(self) -> None:
        # Non-inheritable (PEP 446): the child gets the read end only as its fd 0.
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._unsent = 0  # bytes offered that never made it into the pipe
        self._closed_write = False
        self._final: int | None = None  # the count taken as the read end closed

    async def send(self, data: bytes, exited: anyio.Event) -> bool:
        """Write all of ``data`` unless the child exits first; True when all of it is in."""
        view = memoryview(data)
        while view:
            if self._closed_write:
                self._unsent += len(view)
                return False
            try:
                view = view[os.write(self._write_fd, view) :]
            except BlockingIOError:
                if not await self._room_or_exit(exited):
                    self._unsent += len(view)
                    return False
        return True

    async def _room_or_exit(self, exited: anyio.Event) -> bool:
        async with anyio.create_task_group() as tg:

            async def on_exit() -> None:
                await exited.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(on_exit)
            await anyio.wait_writable(self._write_fd)
            tg.cancel_scope.cancel()
        return not exited.is_set()

    def close_write(self) -> None:
        """EOF for the child; the read end stays, holding what it has not read."""
        if not self._closed_write:
            self._closed_write = True
            os.close(self._write_fd)

    def unread(self) -> int:
        """Bytes offered to the child that it did not read: still in the pipe, or never sent.

        Meaningful once the child (and anything else holding its stdin) is gone.
        """
        if self._final is not None:
            return self._final
        count = array.array("i", [0])
        fcntl.ioctl(self.read_fd, termios.FIONREAD, count, True)
        return self._unsent + count[0]

    def close(self) -> None:
        self.close_write()
        if self._final is None:
            self._final = self.unread()
            os.close(self.read_fd)
