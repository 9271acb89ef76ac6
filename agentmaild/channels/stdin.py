"""StdinChannel: a long-lived agent process owned by the daemon, fed one stream-json line a batch.

Busy signal: a turn is running — from our write until that uuid's turn ended (``ack_on="turn"``);
with the Claude preset also while no process of ours runs and a live process listed in
``~/.claude/sessions/*.json`` holds the agent's session.
Ack contract (``ack_on="turn"``, the default): ``deliver`` returns when the turn that consumed our
uuid (= the delivery id) ended well: ``command_lifecycle`` ``completed`` for the uuid, or — for
CLIs without lifecycle events — a ``result`` with ``is_error: false`` after our line was replayed.
``cancelled``, ``is_error``, a crash mid-turn or ``stall_timeout_s`` of silence (the group is
killed) raise ``DeliveryFailed``; the loop retries with the same delivery id, so the same uuid.
``ack_on="write"``: ``deliver`` returns once the line is written to the pipe.
A dead process is restarted by the next ``deliver`` after a capped exponential backoff
(``restart_backoff_initial_s`` … ``max_s``); the Claude preset resumes its session.

Ownership: the process lives in a host task the channel creates on the first ``deliver`` and
always ends in ``aclose()`` (close stdin, wait ``kill_grace_s``, then TERM/KILL the group through
``open_child``'s scope, reaped). A host task rather than a task group: the supervisor calls
``deliver`` inside its own cancel scopes and ``aclose`` later, so a task group opened in
``deliver`` could never be exited in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import anyio
import anyio.abc
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.base import Channel
from agentmaild.channels.claude import (
    ClaudeSession,
    SessionSaver,
    agent_env,
    claude_argv,
    line_uuid,
    session_holder,
    store_session_saver,
)
from agentmaild.channels.spawn import _check_executable, _stall_timeout, render_argv, user_line
from agentmaild.channels.stdin_turns import Turn, parse_event, track
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch
from agentmaild.procs.child import Child, ChildStartError, open_child
from agentmaild.procs.journal import ProcJournal
from agentmaild.procs.lines import Line
from agentmaild.procs.logfiles import RotatingLog, log_path

log: FilteringBoundLogger = structlog.get_logger(__name__)

ACK_ON = ("turn", "write")
# Tells agentmaild's hooks inside the process that the daemon feeds it: they stay quiet.
DELIVERY_MARKER = "stdin"


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


class StdinChannel(Channel):
    """Owns the agent's long-lived process; one turn in flight at a time."""

    kind = "stdin"

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path,
        *,
        save_session: SessionSaver | None = None,
        procs: ProcJournal | None = None,
    ) -> None:
        self.agent = agent
        self._procs = procs
        self.store_path = store_path.absolute()
        self.log_path = log_path(self.store_path, agent.name)
        self._spawn = config.spawn
        self._backoff = (config.stdin.restart_backoff_initial_s, config.stdin.restart_backoff_max_s)
        self._ack_on = _ack_on(agent, config.stdin.ack_on)
        self._stall_timeout_s = _stall_timeout(agent, config.stdin.stall_timeout_s)
        self._claude = agent.preset == "claude" or not agent.command
        saver = save_session or store_session_saver(self.store_path, agent.name)
        self.session = ClaudeSession(agent.session_id, saver) if self._claude else None
        self._env = agent_env(agent, db=self.store_path, delivery_id=DELIVERY_MARKER)
        self._proc: _Process | None = None
        # The process's host task runs in this task group, open while the channel is entered
        # (`async with channel:`, as the supervisor does), so no task outlives the channel.
        self._tg: anyio.abc.TaskGroup | None = None
        self._turn: Turn | None = None
        self._writing = False
        self._closed = False
        self._failures = 0  # unexpected exits since the last good turn
        self._restart_at = 0.0
        self._starts = 0
        self._last_reason: str | None = None
        self._holder: int | None = None  # who held the session at the last is_busy()
        self._earlier: int | None = None  # an earlier daemon's process seen by the last is_busy()
        self._log = log.bind(agent=agent.name, channel=self.kind)

    # -- the Channel API ------------------------------------------------------------------
    async def is_busy(self) -> bool:
        self._holder = None
        if self._in_turn():
            return True
        running = self._proc is not None and self._proc.running
        self._earlier = None
        if running:
            return False
        self._holder = self._held_by()
        if self._holder is None:
            self._earlier = await self._earlier_process()
        return self._holder is not None or self._earlier is not None

    def busy_reason(self) -> str | None:
        if self._in_turn():
            return "in turn"
        if self._holder is not None:
            return f"session held by pid {self._holder}"
        if self._earlier is not None:
            return f"pid {self._earlier} of an earlier daemon still runs"
        return None

    async def deliver(self, batch: Batch, text: str) -> None:
        if self._closed:
            raise AgentUnavailable("stdin channel is closed")
        if self._in_turn():
            raise AgentBusy("a turn is still running")
        self._writing = True
        try:
            proc = await self._ensure_process()
            turn = Turn(line_uuid(batch))
            await self._write(proc, turn, user_line(text, turn.uuid))
        finally:
            self._writing = False
        if self._ack_on == "write":
            self._failures = 0
            return
        # Cancelled here, the turn runs on in the agent: it stays busy until that turn ends.
        await turn.done.wait()
        self._last_reason = turn.error
        if turn.error is not None:
            self._log.info("stdin.turn_failed", delivery_id=batch.delivery_id, reason=turn.error)
            raise DeliveryFailed(turn.error)
        self._failures = 0

    async def __aenter__(self) -> StdinChannel:
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
        self._closed = True
        proc = self._proc
        with anyio.CancelScope(shield=True):
            if proc is not None and not proc.finished.is_set():
                if proc.child is not None:
                    await proc.child.close_stdin()  # the polite stop: EOF ends a stream-json CLI
                with anyio.move_on_after(self._spawn.kill_grace_s):
                    await proc.finished.wait()
                proc.scope.cancel()  # open_child's exit: TERM, grace, KILL the group, reap
                await proc.finished.wait()
        if self._turn is not None:
            self._turn.settle("the channel was closed")

    def describe(self) -> dict[str, object]:
        proc = self._proc
        return {
            "pid": proc.child.pid if proc is not None and proc.child is not None else None,
            "running": proc is not None and proc.running,
            "starts": self._starts,
            "ack_on": self._ack_on,
            "session_id": self.session.id if self.session is not None else self.agent.session_id,
            "last_error": self._last_reason,
            "log": str(self.log_path),
        }

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
        _check_executable(argv[0], cwd, self._env)
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

    def _in_turn(self) -> bool:
        return self._writing or (self._turn is not None and not self._turn.done.is_set())

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


def _ack_on(agent: Agent, default: str) -> str:
    value = agent.settings.get("ack_on", default)
    if value not in ACK_ON:
        raise AgentUnavailable(f"settings.ack_on must be one of {ACK_ON}, got {value!r}")
    return str(value)
