"""OpencodeServerChannel: batches posted into a session of an ``opencode serve`` HTTP server.

The server is the one ``settings.url`` names (attach: a server someone else runs, e.g. under a
TUI), else the agent's command (default ``opencode serve``), started by the daemon, its URL read
from the "listening on http://…" line, restarted with backoff like the stdin channel's process.
Session: ``settings.session`` (a session someone opened), else the stored one (checked with
``GET /session/{id}``; gone → a new one, with a warning), else ``POST /session``, stored before
the first prompt. One batch: the event stream ``GET /event`` is opened first, then
``POST /session/{id}/prompt_async``; the turn is ours from its ``session.status`` busy to the
next ``session.idle``. Ack contract: that idle with no ``session.error`` and no assistant message
error on the way. OpenCode retries a 5xx/429 without end (``session.status`` retry): after
``settings.max_retries`` (default 2) retries, or ``stall_timeout_s`` without an event of our
session, the turn is aborted (``POST /session/{id}/abort``) and not acked. Busy: our turn, or
``GET /session/status`` saying busy/retry for the session (someone else's turn).
Stored as channel ``stdin`` with ``settings.protocol = "opencode-server"`` (no schema change).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.base import Channel
from agentmaild.channels.claude import SessionSaver, agent_env, store_session_saver
from agentmaild.channels.http_sse import Endpoint, HttpFailed, call, events
from agentmaild.channels.login import failed_turn
from agentmaild.channels.opencode_turn import TurnWatch, max_retries
from agentmaild.channels.rpc_channel import START_TIMEOUT_S, positive_setting
from agentmaild.channels.stdin import DELIVERY_MARKER
from agentmaild.channels.stdin_host import StdinHost, _Process
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent, Batch
from agentmaild.procs.journal import ProcJournal
from agentmaild.procs.lines import Line
from agentmaild.store.location import StoreLocation

log: FilteringBoundLogger = structlog.get_logger(__name__)

PROTOCOL = "opencode-server"
ABORT_WAIT_S = 10.0
_LISTENING = re.compile(rb"listening on (http://[^\s]+)")


class OpencodeServerChannel(StdinHost, Channel):
    """One OpenCode server session; one prompt in flight at a time."""

    kind = "opencode-server"
    interruptible = True
    protocol = PROTOCOL
    ends_on_eof = False

    def __init__(
        self,
        agent: Agent,
        config: Config,
        store_path: Path | StoreLocation,
        *,
        save_session: SessionSaver | None = None,
        procs: ProcJournal | None = None,
    ) -> None:
        super().__init__(agent, config, store_path, procs)
        self._stall_s = self._stall_timeout_s or 0.0
        self._start_timeout_s = positive_setting(agent, "opencode_start_timeout_s", START_TIMEOUT_S)
        self._max_retries = max_retries(agent)
        self._save = save_session or store_session_saver(self.store, agent.name)
        self._env = agent_env(agent, db=self.store, delivery_id=DELIVERY_MARKER)
        self._auth = _auth(self._env)
        self._attach = _attach_endpoint(agent, self._auth)
        if self._attach is None and not agent.command:
            raise AgentUnavailable("the opencode-server channel needs settings.url or a command")
        fixed = agent.settings.get("session")
        self._session_value: str | None = fixed if isinstance(fixed, str) else agent.session_id
        self._checked: str | None = None  # the session id known to exist on the server
        self._served: tuple[_Process, Endpoint] | None = None
        self._url_seen = anyio.Event()
        self._watch: TurnWatch | None = None
        self._writing = False
        self._others_busy = False
        self._last_reason: str | None = None
        self._log = log.bind(agent=agent.name, channel=self.kind)

    # -- the Channel API ------------------------------------------------------------------
    async def is_busy(self) -> bool:
        self._others_busy = False
        if self._in_turn():
            return True
        endpoint = self._known_endpoint()
        if endpoint is None or self._session_value is None:
            return False if self._attach is not None else await self._earlier_busy()
        self._others_busy = await self._session_busy(endpoint, self._session_value)
        return self._others_busy

    def busy_reason(self) -> str | None:
        if self._in_turn():
            return "in turn"
        return "the session runs a turn of its own" if self._others_busy else None

    async def deliver(self, batch: Batch, text: str) -> None:
        if self._closed:
            raise AgentUnavailable("opencode-server channel is closed")
        if self._in_turn():
            raise AgentBusy("a prompt is still running")
        self._writing = True
        try:
            endpoint, session = await self._open()
            if await self._session_busy(endpoint, session):
                raise AgentBusy(f"session {session} is busy")
            reason = await self._one_turn(endpoint, session, text)
        except HttpFailed as exc:
            reason = f"the server failed mid-turn: {exc}"
        finally:
            self._writing = False
        self._last_reason = reason
        if reason is not None:
            self._log.info("opencode.turn_failed", delivery_id=batch.delivery_id, reason=reason)
            self._last_reason = (failed := failed_turn(self.agent, reason, reason)).message
            raise failed  # not logged in: unavailable
        self._failures = 0

    async def interrupt(self) -> str:
        """``POST /session/{id}/abort``: the server ends our turn (its next idle)."""
        endpoint, watch = self._known_endpoint(), self._watch
        if endpoint is None or watch is None:
            raise DeliveryFailed("no turn of this daemon is running")
        try:
            path = f"/session/{watch.session}/abort"
            status, answer = await call(endpoint, "POST", path, {}, query=self._query())
        except HttpFailed as exc:
            raise DeliveryFailed(f"abort: {exc}") from None
        if status not in (200, 204):
            raise DeliveryFailed(f"abort: HTTP {status} {_message(answer)}")
        return "session abort: the server ends the turn"

    def describe(self) -> dict[str, object]:
        proc, endpoint = self._proc, self._known_endpoint()
        return {
            "pid": proc.child.pid if proc is not None and proc.child is not None else None,
            "running": proc is not None and proc.running,
            "starts": self._starts,
            "protocol": PROTOCOL,
            "url": f"http://{endpoint.host}:{endpoint.port}{endpoint.prefix}" if endpoint else None,
            "session_id": self._session_value,
            "last_error": self._last_reason,
            "log": str(self.log_path),
        }

    # -- one turn -------------------------------------------------------------------------
    async def _one_turn(self, endpoint: Endpoint, session: str, text: str) -> str | None:
        query = self._query()
        watch = TurnWatch(session, self._max_retries)
        async with events(endpoint, "/event", query=query) as stream:
            await anext(stream)  # server.connected: subscribed before the prompt exists
            body = {"parts": [{"type": "text", "text": text}]}
            path = f"/session/{session}/prompt_async"
            status, answer = await call(endpoint, "POST", path, body, query=query)
            if status not in (200, 204):
                return f"prompt_async: HTTP {status} {_message(answer)}"
            self._watch, self._writing = watch, False
            try:
                reason = await self._follow(stream, watch)
                self.last_usage = watch.usage.total()  # the loop records it, acked or not
                if reason is not None and not watch.ended:
                    await self._abort(endpoint, stream, watch)
            finally:
                # Cancelled, the turn runs on in the server: is_busy asks /session/status.
                self._watch = None
        return reason

    async def _follow(self, stream: AsyncIterator[dict[str, Any]], watch: TurnWatch) -> str | None:
        """Events until our turn ends; the stall timer counts only our session's events."""
        deadline = anyio.current_time() + self._stall_s
        while not watch.ended:
            with anyio.move_on_after(deadline - anyio.current_time()) as scope:
                event = await anext(stream)
            if scope.cancelled_caught:
                return f"stalled: no event of the session for {self._stall_s:g}s"
            if watch.see(event):
                deadline = anyio.current_time() + self._stall_s
            if watch.gave_up is not None:
                return watch.gave_up
        return watch.error

    async def _abort(
        self, endpoint: Endpoint, stream: AsyncIterator[dict[str, Any]], watch: TurnWatch
    ) -> None:
        """End the turn in the server, and wait (bounded) for it to say idle."""
        self._log.info("opencode.turn_aborting", session_id=watch.session)
        path = f"/session/{watch.session}/abort"
        with anyio.move_on_after(ABORT_WAIT_S):
            await call(endpoint, "POST", path, {}, query=self._query())
            while not watch.ended:
                watch.see(await anext(stream))

    # -- the server and the session -------------------------------------------------------
    async def _open(self) -> tuple[Endpoint, str]:
        """The server and our session on it; unreachable: AgentUnavailable (no attempt lost)."""
        try:
            endpoint = await self._endpoint()
            return endpoint, await self._session(endpoint)
        except HttpFailed as exc:
            raise AgentUnavailable(f"the OpenCode server cannot be reached: {exc}") from None

    async def _endpoint(self) -> Endpoint:
        if self._attach is not None:
            return self._attach
        proc = await self._ensure_process()
        with anyio.move_on_after(self._start_timeout_s):
            while self._served is None or self._served[0] is not proc:
                if proc.finished.is_set():
                    raise DeliveryFailed("opencode serve exited before it listened")
                await self._url_seen.wait()
                self._url_seen = anyio.Event()
            return self._served[1]
        if proc.child is not None:
            await proc.child.terminate()  # a hung start: the next deliver starts afresh
        raise DeliveryFailed(f"no server URL within {self._start_timeout_s:g}s of the start")

    async def _session(self, endpoint: Endpoint) -> str:
        stored = self._session_value
        if stored is not None and stored == self._checked:
            return stored
        if stored is not None:
            status, answer = await call(endpoint, "GET", f"/session/{stored}", query=self._query())
            if status == 200:
                self._checked = stored
                return stored
            self._log.warning("opencode.session_gone", session_id=stored, status=status)
        status, answer = await call(endpoint, "POST", "/session", {}, query=self._query())
        session = answer.get("id") if isinstance(answer, dict) else None
        if status != 200 or not isinstance(session, str) or not session:
            raise DeliveryFailed(f"POST /session: HTTP {status} {_message(answer)}")
        await self._save(session)  # before the first prompt: a crash cannot fork it silently
        self._session_value = self._checked = session
        self._log.info("opencode.session_new", session_id=session)
        return session

    async def _session_busy(self, endpoint: Endpoint, session: str) -> bool:
        try:
            status, answer = await call(endpoint, "GET", "/session/status", query=self._query())
        except HttpFailed:
            return False  # deliver will say why
        state = answer.get(session) if status == 200 and isinstance(answer, dict) else None
        return isinstance(state, dict) and state.get("type") in ("busy", "retry")

    def _known_endpoint(self) -> Endpoint | None:
        if self._attach is not None:
            return self._attach
        proc, served = self._proc, self._served
        return served[1] if served is not None and proc is served[0] and proc.running else None

    async def _earlier_busy(self) -> bool:
        return await self._earlier_process() is not None

    def _query(self) -> dict[str, str]:
        return {"directory": self.agent.cwd} if self.agent.cwd else {}

    def _on_line(self, proc: _Process, line: Line) -> None:
        proc.lines += 1
        found = _LISTENING.search(line.data)
        if found is not None:
            url = found.group(1).decode(errors="replace")
            self._served = (proc, Endpoint.parse(url, auth=self._auth))
            self._log.info("opencode.listening", url=url)
            self._url_seen.set()

    def _ended(self, proc: _Process) -> None:
        super()._ended(proc)
        self._url_seen.set()  # a start waiting for the URL learns of the exit

    def _in_turn(self) -> bool:
        return self._writing or self._watch is not None


def _auth(env: dict[str, str]) -> str | None:
    """The server's Basic credential when ``OPENCODE_SERVER_PASSWORD`` protects it."""
    password = env.get("OPENCODE_SERVER_PASSWORD")
    return f"{env.get('OPENCODE_SERVER_USERNAME', 'opencode')}:{password}" if password else None


def _attach_endpoint(agent: Agent, auth: str | None) -> Endpoint | None:
    url = agent.settings.get("url")
    if url is None:
        return None
    try:
        return Endpoint.parse(str(url), auth=auth)
    except ValueError as exc:
        raise AgentUnavailable(f"settings.url: {exc}") from None


def _message(answer: Any) -> str:
    data = answer.get("data") if isinstance(answer, dict) else None
    text = data.get("message") if isinstance(data, dict) else None
    return str(text or answer or "")[:200]
