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

import errno
import os
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.procs.cgroups import CgroupScope, executable, scope_for
from agentmaild.procs.child import DRAIN_MIN_S, Child, ChildStartError, LineCallback
from agentmaild.procs.escapes import SCOPE_ENV, new_token
from agentmaild.procs.journal import ScopeRecord
from agentmaild.procs.lines import LINE_MAX_BYTES, Line, LineSplitter
from agentmaild.procs.logfiles import RotatingLog
from agentmaild.procs.pids import start_time
from agentmaild.procs.stdin_pipe import OwnedStdin

log: FilteringBoundLogger = structlog.get_logger(__name__)


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
    pipe = OwnedStdin() if own_stdin else None
    env = {**(env if env is not None else os.environ), SCOPE_ENV: token}
    cgroup = _contained(argv, env, token, pipe)
    process = await _spawn(cgroup.wrap(list(argv)) if cgroup else argv, cwd, env, pipe)
    child = Child(process, stall_timeout_s=stall_timeout_s, kill_grace_s=kill_grace_s,
                  logger=bound, token=token, stdin_pipe=pipe, cgroup=cgroup)
    bound.debug("proc.started", pid=process.pid, executable=argv[0])
    # The block's own exception is carried past the task group and re-raised as itself: raised
    # inside, anyio would wrap it in an ExceptionGroup and callers could not catch it plainly.
    failure: BaseException | None = None
    try:
        with anyio.CancelScope(shield=True):  # a leader running unrecorded would be missed
            await _journal_start(child, record)
        async with anyio.create_task_group() as tg:
            outs = (_tee(on_stdout, log_file, b""), _tee(on_stderr, log_file, b"[stderr] "))
            _watch(tg, child, process, outs, line_max_bytes, pipe is not None)
            try:
                yield child
            except BaseException as exc:
                failure = exc
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(child, kill_grace_s)
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
    finally:
        with anyio.CancelScope(shield=True):
            await _reap(child, process, record, bound)
        if pipe is not None:
            pipe.close()


def _contained(
    argv: Sequence[str], env: Mapping[str, str], token: str, pipe: OwnedStdin | None
) -> CgroupScope | None:
    """The scope's cgroup (``procs.cgroups``), None where unavailable. Behind the cgroup's
    prologue a missing command would start a shell that fails: it is refused here instead."""
    cgroup = scope_for(token)
    if cgroup is not None and executable(argv[0], env.get("PATH")) is None:
        cgroup.remove()
        if pipe is not None:
            pipe.close()
        strerror = os.strerror(errno.ENOENT)
        raise ChildStartError(f"cannot start {argv[0]}: {strerror}", errno.ENOENT)
    return cgroup


async def _spawn(
    argv: Sequence[str], cwd: str | Path | None, env: Mapping[str, str], pipe: OwnedStdin | None
) -> anyio.abc.Process:
    """The child, leader of a new session; ``ChildStartError`` when it cannot start."""
    process: anyio.abc.Process | None = None
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
    assert process is not None  # a shield never cancels: open_process returned or raised
    return process


def _watch(
    tg: anyio.abc.TaskGroup,
    child: Child,
    process: anyio.abc.Process,
    outs: tuple[LineCallback, LineCallback],
    line_max_bytes: int,
    owned_stdin: bool,
) -> None:
    """The child's companions: both pipes drained, the stall watchdog, the escapes' watch."""
    assert process.stdout is not None
    assert process.stderr is not None
    tg.start_soon(child._drain, process.stdout, LineSplitter(line_max_bytes), outs[0])
    tg.start_soon(child._drain, process.stderr, LineSplitter(line_max_bytes), outs[1])
    tg.start_soon(child._watchdog)
    tg.start_soon(child.escapes.run)
    if owned_stdin:
        tg.start_soon(child._watch_exit)


async def _stop(child: Child, kill_grace_s: float) -> None:
    """Leaving the block: stdin closed, the group stopped, its output drained (bounded)."""
    await child.close_stdin()
    await child.terminate()
    with anyio.move_on_after(max(kill_grace_s, DRAIN_MIN_S)):
        await child._drained.wait()


async def _reap(
    child: Child, process: anyio.abc.Process, record: ScopeRecord | None,
    bound: FilteringBoundLogger,
) -> None:
    """Always, even when the task group itself failed: stopped, reaped, journalled, logged."""
    await child.terminate()
    await process.aclose()
    if record is not None and child.start_time is not None:
        await record.stopped(child.pid, child.start_time)
    done = child._exit()
    duration_s = round(done.duration_s, 3)
    bound.debug("proc.exited", pid=done.pid, returncode=done.returncode, duration_s=duration_s)


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
