"""A running child process: its stdin, its output drained into lines, a stall watchdog, the stop.

``Child`` is what ``open_child`` (``scope``) yields. Its stop (``terminate``) signals the whole
process group (SIGTERM, ``kill_grace_s``, SIGKILL) in a shielded scope, stops descendants that
left the group (``escapes``) and reaps the leader; it is idempotent. ``ChildExit`` is how a child
ended, ``ChildStartError`` that it never started.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream, Process
from structlog.typing import FilteringBoundLogger

from agentmaild.procs.cgroups import CgroupScope
from agentmaild.procs.escapes import EscapeWatch
from agentmaild.procs.groups import group_alive, signal_group
from agentmaild.procs.lines import Line, LineSplitter
from agentmaild.procs.stdin_pipe import OwnedStdin

_GROUP_POLL_S = 0.02
DRAIN_MIN_S = 2.0  # after the group is gone, EOF is near; bound it for pipes held elsewhere


LineCallback = Callable[[Line], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildExit:
    pid: int
    returncode: int  # negative: killed by that signal
    stalled: bool  # the watchdog stopped it
    killed: bool  # SIGKILL was needed
    duration_s: float

    def reason(self) -> str:
        """A short human reason for a non-zero exit (empty when it exited 0)."""
        if self.stalled:
            return "stalled: no output, process group terminated"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = str(-self.returncode)
            return f"killed by {name}"
        return f"exit code {self.returncode}" if self.returncode else ""


class ChildStartError(Exception):
    """The child could not be started (missing executable, bad cwd, no permission)."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class Child:
    """A running child inside ``open_child``; its stdin, exit and stall timeout are yours."""

    def __init__(
        self,
        process: Process,
        *,
        stall_timeout_s: float | None,
        kill_grace_s: float,
        logger: FilteringBoundLogger,
        token: str = "",
        stdin_pipe: OwnedStdin | None = None,
        cgroup: CgroupScope | None = None,
    ) -> None:
        self._process = process
        self._stdin_pipe = stdin_pipe
        self._exited = anyio.Event()
        self.pid = process.pid
        self.start_time: str | None = None
        self.escapes = EscapeWatch(process.pid, token, cgroup=cgroup)
        self.stall_timeout_s = stall_timeout_s
        self.kill_grace_s = kill_grace_s
        self.stalled = False
        self.killed = False
        self._log = logger.bind(pid=process.pid)
        self._started = time.monotonic()
        self._last_output = anyio.current_time()
        self._rearm = anyio.Event()
        self._stop_done: anyio.Event | None = None
        self._open_streams = 2
        self._drained = anyio.Event()

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def send(self, data: bytes) -> bool:
        """Write to the child's stdin; False when the child no longer reads it."""
        if self._stdin_pipe is not None:
            return await self._stdin_pipe.send(data, self._exited)
        stdin = self._process.stdin
        if stdin is None:
            return False
        try:
            await stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return False
        return True

    async def close_stdin(self) -> None:
        if self._stdin_pipe is not None:
            self._stdin_pipe.close_write()
        if self._process.stdin is not None:
            try:
                await self._process.stdin.aclose()
            except (anyio.BrokenResourceError, OSError):
                pass  # the child already went; closing our end is all that was asked

    def stdin_unread(self) -> int | None:
        """Bytes sent that the child never read (``own_stdin`` only; after ``wait``)."""
        return None if self._stdin_pipe is None else self._stdin_pipe.unread()

    async def _watch_exit(self) -> None:
        await self._process.wait()
        self._exited.set()

    def set_stall_timeout(self, stall_timeout_s: float | None) -> None:
        """Change (or disable with None) the watchdog; the silence clock restarts now."""
        self.stall_timeout_s = stall_timeout_s
        self.touch()
        self._rearm.set()

    def touch(self) -> None:
        """Count now as activity (e.g. a long-lived child was just given a new turn)."""
        self._last_output = anyio.current_time()

    async def wait(self) -> ChildExit:
        """Wait for the leader to exit, stop what it left in its group, drain its output."""
        await self._process.wait()
        await self.terminate()
        with anyio.move_on_after(max(self.kill_grace_s, DRAIN_MIN_S)):
            await self._drained.wait()
        return self._exit()

    async def interrupt(self, grace_s: float) -> ChildExit:
        """SIGINT the group (a CLI's own "stop this turn"); what still runs after ``grace_s``
        is stopped as ``terminate`` stops it (TERM, grace, KILL), and reaped."""
        if self._process.returncode is None:
            self._log.info("proc.interrupting", signal="SIGINT")
            signal_group(self.pid, signal.SIGINT)
            with anyio.move_on_after(grace_s):
                await self._exited.wait()
        return await self.terminate()

    async def terminate(self) -> ChildExit:
        """SIGTERM the group, SIGKILL what is left after ``kill_grace_s``, reap. Idempotent."""
        if self._stop_done is None:
            self._stop_done = anyio.Event()
            try:
                # Shielded: a stop half done (TERM sent, KILL never) would leave the group alive.
                with anyio.CancelScope(shield=True):
                    await self._stop_group()
            finally:
                self._stop_done.set()
        else:
            await self._stop_done.wait()
        return self._exit()

    async def _stop_group(self) -> None:
        if self._process.returncode is None:
            self.escapes.snapshot()  # while ancestry and session still point at the leader
        if self._process.returncode is None or group_alive(self.pid):
            await self._stop_members()
        stopped, killed = await self.escapes.stop(self.kill_grace_s)
        if stopped:
            self.killed = self.killed or killed
            self._log.warning("proc.escaped_stopped", pids=stopped, killed=killed)

    async def _stop_members(self) -> None:
        self._log.info("proc.terminating", signal="SIGTERM")
        signal_group(self.pid, signal.SIGTERM)
        with anyio.move_on_after(self.kill_grace_s):
            await self._process.wait()
            # Stragglers are not our children, so nothing can be awaited for them: poll, bounded.
            while group_alive(self.pid):  # noqa: ASYNC110 - no event exists for a group emptying
                await anyio.sleep(_GROUP_POLL_S)
        if self._process.returncode is None or group_alive(self.pid):
            self.killed = True
            self._log.warning("proc.killing", signal="SIGKILL")
            signal_group(self.pid, signal.SIGKILL)
        await self._process.wait()

    def _exit(self) -> ChildExit:
        rc = self._process.returncode
        return ChildExit(
            pid=self.pid,
            returncode=rc if rc is not None else -signal.SIGKILL,
            stalled=self.stalled,
            killed=self.killed,
            duration_s=time.monotonic() - self._started,
        )

    async def _drain(
        self,
        stream: ByteReceiveStream,
        splitter: LineSplitter,
        on_line: Callable[[Line], None],
    ) -> None:
        try:
            async for chunk in stream:
                self._last_output = anyio.current_time()
                for line in splitter.feed(chunk):
                    on_line(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the pipe went away with the child: the same as EOF
        finally:
            for line in splitter.flush():
                on_line(line)
            self._open_streams -= 1
            if self._open_streams == 0:
                self._drained.set()

    async def _watchdog(self) -> None:
        while True:
            timeout = self.stall_timeout_s
            if timeout is None:
                await self._rearm.wait()
            else:
                remaining = self._last_output + timeout - anyio.current_time()
                if remaining <= 0:
                    break
                with anyio.move_on_after(remaining):
                    await self._rearm.wait()
            if self._rearm.is_set():
                self._rearm = anyio.Event()
        if self._stop_done is not None or self._process.returncode is not None:
            return  # it ended (or is being stopped) on its own: not a stall
        self.stalled = True
        self._log.warning("proc.stalled", stall_timeout_s=self.stall_timeout_s)
        await self.terminate()
