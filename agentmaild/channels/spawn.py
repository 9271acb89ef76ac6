"""SpawnChannel: one headless process per batch, fed one stream-json user line on stdin.

Busy signal: this agent's previous turn (the channel's one child) is still running. Ack contract:
``deliver`` returns only when the turn ended successfully — exit 0 with its stdin line read to the
last byte under the generic ``settings["success"] = "exit0"`` rule, and in addition a stream-json
``result`` event with ``is_error: false`` under ``"result"``. "Read" is measured, not guessed: the
channel keeps the read end of the child's stdin pipe, so after the exit the bytes still in it are
the bytes the agent never read (see ``procs.stdin_pipe``). Anything else raises ``DeliveryFailed``
with a short reason; a command that cannot be started (missing executable, bad cwd), or a turn
whose output says its CLI is not logged in (``login``), raises ``AgentUnavailable``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.base import Channel
from agentmaild.channels.commands import (
    check_executable,
    child_env,
    render_argv,
    stall_timeout,
    store_of,
    user_line,
)
from agentmaild.channels.login import failed_turn
from agentmaild.channels.stream_events import StreamJsonEvents
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch
from agentmaild.procs.child import Child, ChildExit, ChildStartError
from agentmaild.procs.journal import ProcJournal, ScopeRecord
from agentmaild.procs.logfiles import RotatingLog, log_path
from agentmaild.procs.scope import open_child
from agentmaild.store.location import StoreLocation

log: FilteringBoundLogger = structlog.get_logger(__name__)

SUCCESS_RULES = ("exit0", "result")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Launch:
    argv: list[str]
    cwd: str | None
    env: dict[str, str]
    delivery_id: str

    def header(self) -> bytes:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        return f"--- {stamp} turn delivery={self.delivery_id} argv0={self.argv[0]}\n".encode()


class SpawnChannel(Channel):
    """Runs ``agent.command`` once per batch; holds at most one child (one turn) at a time."""

    kind = "spawn"
    interruptible = True

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path | StoreLocation,
        *,
        procs: ProcJournal | None = None,
    ) -> None:
        self.agent = agent
        self._procs = procs
        self.store = store_of(store_path)
        self.store_path = self.store.local_path  # logs and markers go beside it
        self.log_path = log_path(self.store_path, agent.name)
        self._spawn = config.spawn
        self._success = _success_rule(agent)
        self._stall_timeout_s = stall_timeout(agent, config.spawn.stall_timeout_s)
        self._child: Child | None = None
        self._in_turn = False  # set before the fork too, so a second deliver can never overlap
        self._earlier: int | None = None  # an earlier daemon's process seen by the last is_busy()
        self._closed = False
        self._last_exit: ChildExit | None = None
        self._last_reason: str | None = None
        self._turns = 0
        self._log = log.bind(agent=agent.name, channel=self.kind)

    async def is_busy(self) -> bool:
        self._earlier = None if self._in_turn else await self._earlier_process()
        return self._in_turn or self._earlier is not None

    async def _earlier_process(self) -> int | None:
        """A process an earlier daemon started for this agent and that still runs."""
        return await self._procs.held_by(self.agent.name) if self._procs is not None else None

    def busy_reason(self) -> str | None:
        if self._in_turn:
            return "in turn"
        if self._earlier is not None:
            return f"pid {self._earlier} of an earlier daemon still runs"
        return None

    async def deliver(self, batch: Batch, text: str) -> None:
        if self._closed:
            raise AgentUnavailable("spawn channel is closed")
        if self._in_turn:
            raise AgentBusy("the previous turn is still running")
        earlier = await self._earlier_process()
        if earlier is not None:
            raise AgentBusy(f"pid {earlier}, started by an earlier daemon, is still running")
        self._in_turn = True
        try:
            await self._deliver(batch, text)
        finally:
            self._in_turn = False

    async def _deliver(self, batch: Batch, text: str) -> None:
        launch, events = self._launch(batch), StreamJsonEvents()
        bound = self._log.bind(delivery_id=batch.delivery_id, attempt=batch.attempt)
        line = user_line(text, batch.delivery_id)
        done, unread = await self._run_turn(launch, line, events, bound)
        self._judge(done, unread, events)

    def _launch(self, batch: Batch) -> _Launch:
        argv = self._argv(batch)
        cwd = self._cwd()
        env = child_env(
            os.environ, agent=self.agent.name, db=self.store, delivery_id=batch.delivery_id
        )
        check_executable(argv[0], cwd, env)
        return _Launch(argv=argv, cwd=cwd, env=env, delivery_id=batch.delivery_id)

    async def _run_turn(
        self, launch: _Launch, line: bytes, events: StreamJsonEvents, bound: FilteringBoundLogger
    ) -> tuple[ChildExit, int]:
        """Run one turn; the exit and how many bytes of ``line`` the agent left unread."""
        turn_log = RotatingLog(
            self.log_path, max_bytes=self._spawn.log_max_bytes, keep=self._spawn.log_keep
        )
        turn_log.write(launch.header())
        try:
            async with open_child(
                launch.argv,
                cwd=launch.cwd,
                env=launch.env,
                stall_timeout_s=self._stall_timeout_s,
                kill_grace_s=self._spawn.kill_grace_s,
                on_stdout=events.feed,
                on_stderr=events.tail.feed,
                log_file=turn_log,
                logger=bound,
                record=self._record(launch.delivery_id),
                own_stdin=True,
            ) as child:
                self._child = child
                self._turns += 1
                if self._closed:  # aclose() ran while we were forking
                    await child.terminate()
                await child.send(line)
                await child.close_stdin()
                done = await self._await_exit(child)
                unread = child.stdin_unread() or 0
            turn_log.write(f"--- exit {done.returncode} after {done.duration_s:.3f}s\n".encode())
        except ChildStartError as exc:
            self._last_reason = str(exc)
            raise AgentUnavailable(str(exc)) from exc
        finally:
            self._child = None
            self.last_usage = events.usage.total()  # the loop takes it for the history
            turn_log.close()
        self._last_exit = done
        bound.info(
            "spawn.turn_ended",
            pid=done.pid,
            returncode=done.returncode,
            stalled=done.stalled,
            stdin_unread=unread,
            duration_s=round(done.duration_s, 3),
        )
        return done, unread

    async def _await_exit(self, child: Child) -> ChildExit:
        """Wait for the turn's process to end; presets may do work alongside (save a session id)."""
        return await child.wait()

    def _record(self, delivery_id: str | None) -> ScopeRecord | None:
        return self._procs.scope(self.agent.name, delivery_id) if self._procs is not None else None

    def _judge(self, done: ChildExit, unread: int, events: StreamJsonEvents) -> None:
        reason = done.reason()
        if done.stalled:
            reason = f"stalled: no output for {self._stall_timeout_s:g}s, process group killed"
        elif not reason and unread:
            reason = f"the agent exited without reading its stdin ({unread} bytes left unread)"
        elif not reason and self._success == "result":
            if not events.result_seen:
                reason = "exit 0 without a result event"
            elif events.result_is_error:
                reason = f"result is_error: {events.result_summary or 'no detail'}"
        failed = failed_turn(self.agent, reason, events.tail.text()) if reason else None
        self._last_reason = failed.message if failed else None
        if failed:
            raise failed

    async def interrupt(self) -> str:
        """The turn's process group: SIGINT, then TERM and KILL after ``kill_grace_s`` each."""
        if self._child is None:
            raise DeliveryFailed("no turn of this daemon is running")
        done = await self._child.interrupt(self._spawn.kill_grace_s)
        return f"process group {done.pid} stopped" + (" (killed)" if done.killed else "")

    async def aclose(self) -> None:
        self._closed = True
        if self._child is not None:
            await self._child.terminate()

    def describe(self) -> dict[str, object]:
        last = self._last_exit
        return {
            "pid": self._child.pid if self._child is not None else None,
            "turns": self._turns,
            "last_exit_code": last.returncode if last is not None else None,
            "last_duration_s": round(last.duration_s, 3) if last is not None else None,
            "last_error": self._last_reason,
            "success": self._success,
            "log": str(self.log_path),
        }

    def _argv(self, batch: Batch) -> list[str]:
        template = self.agent.command
        if not template:
            raise AgentUnavailable(f"spawn agent {self.agent.name!r} has no command")
        uses_session = any("{session_id}" in part for part in template)
        if uses_session and not self.agent.session_id:
            raise AgentUnavailable("the command uses {session_id} but the agent has no session id")
        values = {"agent": self.agent.name, "session_id": self.agent.session_id or "",
                  "delivery_id": batch.delivery_id}  # fmt: skip
        return render_argv(template, values)

    def _cwd(self) -> str | None:
        if (cwd := self.agent.cwd) is not None and not Path(cwd).is_dir():
            raise AgentUnavailable(f"cwd {cwd!r} is not a directory")
        return cwd


def _success_rule(agent: Agent) -> str:
    rule = agent.settings.get("success", "exit0")
    if rule not in SUCCESS_RULES:
        raise AgentUnavailable(f"settings.success must be one of {SUCCESS_RULES}, got {rule!r}")
    return str(rule)
