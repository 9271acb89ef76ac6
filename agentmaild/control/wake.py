"""The daemon's wake socket: a Unix datagram socket at ``<control socket>.wake`` (mode 0600).

A sender, once its mail is committed, sends one datagram naming the recipients
(``control.client.send_wake``) and goes on without waiting for a reply: a poke then costs a
``sendto`` instead of a connection, a request and a reply on the control socket. The daemon drains
every datagram queued so far and wakes each named loop once, so a burst of sends to one agent
costs one wake-up. The kernel queues only ``net.unix.max_dgram_qlen`` datagrams (10 by default);
a sender that finds the queue full sends nothing (the daemon is busy reading it anyway), and a
drain that read a full queue's worth calls ``on_overflow``: the daemon then asks the store which
agents have mail, once, instead of trusting the names it read. A datagram that is not a wake
(wrong magic, not UTF-8, too long) is counted and ignored. When the file is missing or refused,
senders fall back to the control socket's ``wake`` request; the file is bound again when it
disappears.

Only our uid can send: the file is 0600 (Linux checks write permission on ``sendto``). Between
``bind`` and ``chmod`` another user could at most wake a loop, which only costs a claim.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog

from agentmaild.control.client import WAKE_MAGIC, WAKE_MAX_BYTES, WAKE_SUFFIX
from agentmaild.control.socketfile import Identity, identity, remove_if_ours

log = structlog.get_logger(__name__)

OnWake = Callable[[list[str] | None], object]  # what it returns is ignored
"""``on_wake(names)``: the named agents (None: every agent) have new mail."""

_DRAIN_MAX = 4096  # datagrams read before the woken loops get to run
_NAME_MAX = 256
_QLEN_FILE = "/proc/sys/net/unix/max_dgram_qlen"
_QLEN_DEFAULT = 10


def queue_limit() -> int:
    """How many datagrams the kernel queues before a sender gets EAGAIN (Linux: qlen + 1)."""
    try:
        with open(_QLEN_FILE, encoding="ascii") as f:
            return int(f.read().strip()) + 1
    except (OSError, ValueError):
        return _QLEN_DEFAULT + 1


def decode_wake(data: bytes) -> list[str] | None:
    """The names a wake datagram carries, None for every agent; ``ValueError`` if not a wake."""
    if not data.startswith(WAKE_MAGIC) or len(data) > WAKE_MAX_BYTES:
        raise ValueError("not a wake datagram")
    rest = data[len(WAKE_MAGIC) :]
    if rest == b"*":
        return None
    if rest and not rest.startswith(b"\n"):
        raise ValueError("no separator after the magic")
    names = rest.decode("utf-8").split("\n")[1:]  # UnicodeDecodeError is a ValueError
    if any(not n or len(n) > _NAME_MAX for n in names):
        raise ValueError("an empty or overlong name")
    return names


class WakeReceiver:
    """Binds ``<control path>.wake``; ``run()`` calls ``on_wake`` per drained burst of datagrams."""

    def __init__(
        self,
        control_path: Path,
        on_wake: OnWake,
        on_overflow: Callable[[], None],
        *,
        check_interval_s: float = 1.0,
    ) -> None:
        self.path = Path(os.fspath(control_path) + WAKE_SUFFIX)
        self._on_wake = on_wake
        self._on_overflow = on_overflow
        self._full = min(queue_limit(), _DRAIN_MAX)
        self._check_interval_s = check_interval_s
        self._sock: socket.socket | None = None
        self._bound: Identity | None = None
        self._watched: socket.socket | None = None  # the socket the event loop reads for us
        self._loop: asyncio.AbstractEventLoop | None = None
        self.received = 0  # datagrams read
        self.ignored = 0  # of which not a wake
        self.bursts = 0  # on_wake calls
        self.overflows = 0  # on_overflow calls

    def bind(self) -> bool:
        """Bind the socket (replacing a dead daemon's file); False, logged, when it cannot be.

        Called after the control socket is bound, so no other daemon serves this path.
        """
        try:
            st = self.path.lstat()
        except FileNotFoundError:
            pass
        except OSError as exc:
            return self._unbound(str(exc))
        else:
            if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
                return self._unbound("the path holds a file that is not our socket")
            self.path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(os.fspath(self.path))
            os.chmod(self.path, 0o600)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            return self._unbound(str(exc))
        self._sock, self._bound = sock, identity(self.path)
        log.debug("control.wake_listening", path=str(self.path))
        return True

    def _unbound(self, error: str) -> bool:
        log.warning("control.wake_unavailable", path=str(self.path), error=error)
        return False

    def close(self) -> None:
        self._unwatch()
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
            remove_if_ours(self.path, self._bound)

    async def run(self) -> None:
        """Until cancelled: drain datagrams as they come and wake; re-bind a removed file.

        The socket is watched by the event loop itself (``add_reader``): a datagram costs one
        callback, not a wait with its own timeout per datagram (issue 15).
        """
        self._loop = asyncio.get_running_loop()
        try:
            while True:
                if self._sock is not None and self._watched is not self._sock:
                    self._unwatch()
                    self._loop.add_reader(self._sock, self._readable)
                    self._watched = self._sock
                    self.drain()  # what came before the watch began
                await anyio.sleep(self._check_interval_s)
                self._check_file()
        finally:
            self.close()

    def _unwatch(self) -> None:
        watched, self._watched = self._watched, None
        if watched is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(watched)

    def _readable(self) -> None:
        try:
            self.drain()
        except Exception:  # a callback's error would only reach the loop's handler: log it here
            log.exception("control.wake_failed")

    def drain(self) -> None:
        """Read what is queued (up to ``_DRAIN_MAX``) and wake each named agent once."""
        sock = self._sock
        if sock is None:
            return
        names: set[str] = set()
        everyone = False
        read = 0
        while read < _DRAIN_MAX:
            try:
                data = sock.recv(WAKE_MAX_BYTES + 1)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # never expected on a bound datagram socket; keep serving
                log.warning("control.wake_recv_failed", error=str(exc))
                break
            read += 1
            self.received += 1
            try:
                found = decode_wake(data)
            except ValueError:
                self.ignored += 1
                log.debug("control.wake_ignored", size=len(data))
                continue
            if found is None:
                everyone = True
            else:
                names.update(found)
        if everyone or names:
            self.bursts += 1
            self._on_wake(None if everyone else sorted(names))
        if read >= self._full:  # a sender may have found the queue full: its wake is not here
            self.overflows += 1
            self._on_overflow()

    def _check_file(self) -> None:
        """Bind again when the file is gone; one that is there (ours or not) is left alone."""
        if identity(self.path) is not None:
            return
        if self._sock is not None:
            self._unwatch()
            self._sock.close()
            self._sock = None
        if self.bind():
            log.warning("control.wake_rebound", path=str(self.path))
