"""The child-process scope: one agent process group started, drained, watched, stopped and reaped.

``open_child`` is an async context manager. Inside it the child runs in its own session (so its
pid is its process-group id), stdout and stderr are drained concurrently line by line (each line
capped at ``line_max_bytes``; the rest of an over-long line is dropped and the line is marked
truncated), both are teed to a size-bounded ``RotatingLog``, and a watchdog stops the whole group
when it has been silent for ``stall_timeout_s``. Leaving the block — normally, by an exception or
by cancellation — stops the group (SIGTERM, ``kill_grace_s``, SIGKILL) in a shielded scope and
reaps the leader, so no child outlives its scope. Descendants that left the group (setsid, double
fork) are found and stopped too (``escapes``), and an optional ``ScopeRecord`` journals the leader
from just after the fork until it was stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import structlog
from anyio.abc import ByteReceiveStream, Process
from structlog.typing import FilteringBoundLogger

from agentmaild.procs.escapes import SCOPE_ENV, EscapeWatch, new_token
from agentmaild.procs.groups import group_alive, signal_group
from agentmaild.procs.journal import ScopeRecord
from agentmaild.procs.lines import LINE_MAX_BYTES, Line, LineSplitter
from agentmaild.procs.logfiles import RotatingLog
from agentmaild.procs.pids import start_time
from agentmaild.procs.stdin_pipe import OwnedStdin

log: FilteringBoundLogger = structlog.get_logger(__name__)


_READ_CHUNK = 65536
_GROUP_POLL_S = 0.02
_DRAIN_MIN_S = 2.0  # after the group is gone, EOF is near; bound it for pipes held elsewhere


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
    ) -> None:
        self._process = process
        self._stdin_pipe = stdin_pipe
        self._exited = anyio.Event()
        self.pid = process.pid
        self.start_time: str | None = None
        self.escapes = EscapeWatch(process.pid, token)
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
        with anyio.move_on_after(max(self.kill_grace_s, _DRAIN_MIN_S)):
            await self._drained.wait()
        return self._exit()

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


@asynccontextmanager
async def open_child(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stall_timeout_s: float | None = None,
    kill_grace_s: float = 5.0,
    on_stdout: LineCallback | None = None,
    on_stderr: LineCallback | None = None,
    log_file: RotatingLog | None = None,
    line_max_bytes: int = LINE_MAX_BYTES,
    logger: FilteringBoundLogger | None = None,
    record: ScopeRecord | None = None,
    own_stdin: bool = False,
) -> AsyncIterator[Child]:
    """Run ``argv`` (never through a shell) as the leader of a new session for the block's span.

    ``on_stdout``/``on_stderr`` are called synchronously for each line and must not block.
    ``record`` is told the leader's pid and start time after the fork and again once stopped.
    ``own_stdin``: stdin is an ``OwnedStdin`` pipe, so ``Child.stdin_unread()`` can tell after
    the exit whether the child read what it was sent. Raises ``ChildStartError`` if the process
    cannot be started.
    """
    bound = logger if logger is not None else log
    token = new_token()
    env = {**(env if env is not None else os.environ), SCOPE_ENV: token}
    pipe = OwnedStdin() if own_stdin else None
    try:
        # Shielded: a cancellation landing between fork and handle would leak an unowned child.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                list(argv),
                stdin=pipe.read_fd if pipe is not None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
    except OSError as exc:
        if pipe is not None:
            pipe.close()
        where = f" ({exc.filename})" if exc.filename else ""
        raise ChildStartError(f"cannot start {argv[0]}: {exc.strerror}{where}", exc.errno) from exc
    child = Child(
        process,
        stall_timeout_s=stall_timeout_s,
        kill_grace_s=kill_grace_s,
        logger=bound,
        token=token,
        stdin_pipe=pipe,
    )
    bound.debug("proc.started", pid=process.pid, executable=argv[0])
    # The block's own exception is carried past the task group and re-raised as itself: raised
    # inside, anyio would wrap it in an ExceptionGroup and callers could not catch it plainly.
    failure: BaseException | None = None
    try:
        with anyio.CancelScope(shield=True):  # a leader running unrecorded would be missed
            await _journal_start(child, record)
        async with anyio.create_task_group() as tg:
            assert process.stdout is not None
            assert process.stderr is not None
            tg.start_soon(
                child._drain,
                process.stdout,
                LineSplitter(line_max_bytes),
                _tee(on_stdout, log_file, b""),
            )
            tg.start_soon(
                child._drain,
                process.stderr,
                LineSplitter(line_max_bytes),
                _tee(on_stderr, log_file, b"[stderr] "),
            )
            tg.start_soon(child._watchdog)
            tg.start_soon(child.escapes.run)
            if pipe is not None:
                tg.start_soon(child._watch_exit)
            try:
                yield child
            except BaseException as exc:
                failure = exc
            finally:
                with anyio.CancelScope(shield=True):
                    await child.close_stdin()
                    await child.terminate()
                    with anyio.move_on_after(max(kill_grace_s, _DRAIN_MIN_S)):
                        await child._drained.wait()
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        with anyio.CancelScope(shield=True):
            await child.terminate()  # also when the task group itself failed
            await process.aclose()
            if record is not None and child.start_time is not None:
                await record.stopped(child.pid, child.start_time)
        if pipe is not None:
            pipe.close()
        done = child._exit()
        bound.debug(
            "proc.exited",
            pid=done.pid,
            returncode=done.returncode,
            duration_s=round(done.duration_s, 3),
        )


async def _journal_start(child: Child, record: ScopeRecord | None) -> None:
    if record is None:
        return
    # Off the loop where it means running `ps` (no /proc); with /proc it is one small read.
    child.start_time = await anyio.to_thread.run_sync(start_time, child.pid)
    if child.start_time is not None:
        await record.started(child.pid, child.start_time)


def _tee(
    callback: LineCallback | None, log_file: RotatingLog | None, prefix: bytes
) -> LineCallback:
    def on_line(line: Line) -> None:
        if log_file is not None:
            log_file.write_line(line, prefix)
        if callback is not None:
            callback(line)

    return on_line
