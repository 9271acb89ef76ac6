"""The stdin channel's process host: the agent's long-lived process started, fed, watched, ended.

``StdinHost`` is the base of ``StdinChannel``. A start (``_Process``) runs in a host task inside
``open_child``'s scope from fork to reaped exit; an unexpected exit settles the turn in flight and
sets the restart backoff; each stdout line is tracked into the turn. Before a start it checks that
no live process (a session holder, or one an earlier daemon started) owns the agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.claude import ClaudeSession, claude_argv, session_holder
from agentmaild.channels.commands import check_executable, render_argv, stall_timeout, store_of
from agentmaild.channels.stdin_turns import Turn, parse_event, track
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent
from agentmaild.procs.child import Child, ChildStartError
from agentmaild.procs.journal import ProcJournal
from agentmaild.procs.lines import Line
from agentmaild.procs.logfiles import RotatingLog, log_path
from agentmaild.procs.scope import open_child
from agentmaild.store.location import StoreLocation


@dataclass(slots=True)
class _Process:
    """One start of the agent's command, from fork to reaped exit."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    started: anyio.Event = field(default_factory=anyio.Event)
    finished: anyio.Event = field(default_factory=anyio.Event)
    child: Child | None = None
    start_error: str | None = None
    lines: int = 0
    init_seen: bool = False
    error_before_init: bool = False

    @property
    def running(self) -> bool:
        return self.child is not None and not self.finished.is_set()


class StdinHost:
    """Hosts the agent's process for ``StdinChannel`` (and the protocol channels); they set
    ``_env`` (and ``session``, ``_ack_on`` when not the defaults) in their ``__init__``."""

    agent: Agent
    session: ClaudeSession | None
    _stall_timeout_s: float | None
    _env: dict[str, str]
    _log: FilteringBoundLogger
    ends_on_eof = True  # False: a server that ignores its stdin is sent TERM at once

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path | StoreLocation,
        procs: ProcJournal | None,
    ) -> None:
        self.agent = agent
        self.session = None
        self._procs = procs
        self.store = store_of(store_path)
        self.store_path = self.store.local_path  # logs and markers go beside it
        self.log_path = log_path(self.store_path, agent.name)
        self._spawn = config.spawn
        self._backoff = (config.stdin.restart_backoff_initial_s, config.stdin.restart_backoff_max_s)
        self._ack_on = "turn"
        self._stall_timeout_s = stall_timeout(agent, config.stdin.stall_timeout_s)
        self._proc: _Process | None = None
        # The process's host task runs in this task group, open while the channel is entered
        # (`async with channel:`, as the supervisor does), so no task outlives the channel.
        self._tg: anyio.abc.TaskGroup | None = None
        self._turn: Turn | None = None
        self._closed = False
        self._failures = 0  # unexpected exits since the last good turn
        self._restart_at = 0.0
        self._starts = 0

    async def __aenter__(self) -> Self:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.aclose()  # ends the host task: the task group then exits at once
        finally:
            tg, self._tg = self._tg, None
            if tg is not None:
                await tg.__aexit__(exc_type, exc, tb)

    async def aclose(self) -> None:
        """Stop the process: EOF on its stdin, grace, then TERM/KILL of its group; reaped."""
        self._closed = True
        proc = self._proc
        with anyio.CancelScope(shield=True):
            if proc is not None and not proc.finished.is_set():
                if proc.child is not None and self.ends_on_eof:
                    await proc.child.close_stdin()  # the polite stop: EOF ends a stdio CLI
                    with anyio.move_on_after(self._spawn.kill_grace_s):
                        await proc.finished.wait()
                proc.scope.cancel()  # open_child's exit: TERM, grace, KILL the group, reap
                await proc.finished.wait()

    # -- the process ----------------------------------------------------------------------
    async def _ensure_process(self) -> _Process:
        if self._proc is not None and self._proc.running:
            return self._proc
        delay = self._restart_at - anyio.current_time()
        if delay > 0:
            self._log.info("stdin.restart_waiting", delay_s=round(delay, 3))
            await anyio.sleep(delay)
        holder = self._held_by()
        if holder is not None:
            raise AgentBusy(f"session {self._session_id()} is held by live pid {holder}")
        earlier = await self._earlier_process()
        if earlier is not None:
            raise AgentBusy(f"pid {earlier}, started by an earlier daemon, is still running")
        argv = await self._argv()
        cwd = self.agent.cwd
        if cwd is not None and not await anyio.Path(cwd).is_dir():
            raise AgentUnavailable(f"cwd {cwd!r} is not a directory")
        check_executable(argv[0], cwd, self._env)
        proc = _Process()
        self._proc = proc
        self._starts += 1
        if self._tg is None:
            raise RuntimeError("StdinChannel runs its agent inside `async with channel:`")
        self._tg.start_soon(self._run, proc, argv, cwd, name=f"stdin:{self.agent.name}")
        await proc.started.wait()
        if proc.start_error is not None:
            raise AgentUnavailable(proc.start_error)
        return proc

    async def _run(self, proc: _Process, argv: list[str], cwd: str | None) -> None:
        """The host task: the process's whole life inside ``open_child``'s scope."""
        out = RotatingLog(
            self.log_path, max_bytes=self._spawn.log_max_bytes, keep=self._spawn.log_keep
        )
        out.write(f"--- start argv0={argv[0]} stdin channel\n".encode())
        try:
            with proc.scope:
                async with open_child(
                    argv,
                    cwd=cwd,
                    env=self._env,
                    kill_grace_s=self._spawn.kill_grace_s,
                    on_stdout=lambda line: self._on_line(proc, line),
                    log_file=out,
                    logger=self._log,
                    record=self._procs.scope(self.agent.name, None) if self._procs else None,
                ) as child:
                    proc.child = child
                    self._log.info("stdin.started", pid=child.pid, start=self._starts)
                    proc.started.set()
                    await child.wait()
        except ChildStartError as exc:
            proc.start_error = str(exc)
        except Exception as exc:  # a bug here must end this process, not the daemon
            proc.start_error = f"{type(exc).__name__}: {exc}"
            self._log.exception("stdin.host_crashed")
        finally:
            self._ended(proc)
            out.close()
            proc.started.set()
            proc.finished.set()

    def _ended(self, proc: _Process) -> None:
        child = proc.child
        done = child.returncode if child is not None else None
        if child is not None and child.stalled:
            reason = f"stalled: no output for {self._stall_timeout_s:g}s, process group killed"
        else:
            reason = f"the agent process exited mid-turn (exit code {done})"
        if self._turn is not None and not self._turn.done.is_set():
            self._turn.settle(reason)
        if self.session is not None and child is not None:
            self.session.observe(
                init_seen=proc.init_seen,
                error_before_init=proc.error_before_init,
                any_output=proc.lines > 0,
            )
        if not self._closed:
            self._failures += 1
            initial, cap = self._backoff
            delay = min(cap, initial * 2 ** min(self._failures - 1, 30))
            self._restart_at = anyio.current_time() + delay
            self._log.warning(
                "stdin.exited", returncode=done, failures=self._failures, restart_in_s=delay
            )

    async def _write(self, proc: _Process, turn: Turn, line: bytes) -> None:
        child = proc.child
        assert child is not None
        if self._ack_on == "turn":
            self._turn = turn
            child.set_stall_timeout(self._stall_timeout_s)
        if not await child.send(line):
            turn.settle("the agent process no longer reads its stdin")
            await child.terminate()  # so the next deliver starts a fresh one
            raise DeliveryFailed(turn.error or "write failed")

    async def _argv(self) -> list[str]:
        if self.session is not None:
            return claude_argv(self.agent, await self.session.args())
        assert self.agent.command is not None
        values = {
            "agent": self.agent.name,
            "session_id": self.agent.session_id or "",
            "delivery_id": "",
        }
        return render_argv(self.agent.command, values)

    # -- events ---------------------------------------------------------------------------
    def _on_line(self, proc: _Process, line: Line) -> None:
        proc.lines += 1
        event = parse_event(line)
        if event is None:
            return
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            proc.init_seen = True
        elif kind == "result" and not proc.init_seen and event.get("is_error") is not False:
            proc.error_before_init = True
        turn = self._turn
        if turn is not None and not turn.done.is_set():
            track(turn, event)
            if turn.done.is_set() and proc.child is not None:
                proc.child.set_stall_timeout(None)  # idle between turns is not a stall

    def _session_id(self) -> str | None:
        return self.session.id if self.session is not None else None

    async def _earlier_process(self) -> int | None:
        """A process an earlier daemon started for this agent and that still runs."""
        return await self._procs.held_by(self.agent.name) if self._procs is not None else None

    def _held_by(self) -> int | None:
        session_id, home = self._session_id(), self._env.get("HOME")
        if session_id is None or not home:
            return None
        return session_holder(home, session_id)
