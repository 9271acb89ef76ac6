"""TmuxChannel: pastes a batch into an interactive agent's tmux pane, only while it is idle.

Busy signal — several, never one; any of them makes the agent busy:

- the turn state agentmaild's hooks recorded (``busy``/``waiting``), unless it is older than
  ``settings["turn_state_stale_s"]`` (default 900 s) or Claude's session file reports ``idle``
  more recently (an interrupted turn fires no Stop hook);
- Claude Code's ``$HOME/.claude/sessions/<pid>.json`` ``status`` for the pane's process or a
  descendant (``HOME`` is ``settings["home"]`` or the daemon's);
- the pane itself: it must exist and not be dead (else ``AgentUnavailable``), not be in a mode
  (copy mode), show the composer (a prompt glyph between two rules; a dialog replaces it) empty,
  and no ``esc to interrupt`` in the footer below it.

Ack contract: ``deliver`` pastes the batch through a private named buffer (bracketed paste), presses
Enter and returns only once the submission is verified: the UserPromptSubmit hook recorded the
delivery id (``am_prompt_seen``), or the pane shows the turn started (composer empty and the busy
footer or the delivery id in the transcript). Enter is retried with backoff; unverified within
``verify_timeout_s`` the composer is cleared and ``DeliveryFailed`` raised. A delivery id already
seen submitted is not pasted again. Every tmux call is an argv list on the agent's server; text
only ever travels through ``load-buffer``'s stdin, so no part of it can become a key name.

Reading the screen lives in ``tmux_screen``, running tmux in ``tmux_cmd``, and the busy signals
outside the pane in ``tmux_signals``; this module drives them.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.base import Channel
from agentmaild.channels.tmux_cmd import TmuxCommand
from agentmaild.channels.tmux_interrupt import stop_turn
from agentmaild.channels.tmux_screen import (
    Composer,
    busy_footer,
    dead_pane,
    parse_screen,
    terminal_safe,
)
from agentmaild.channels.tmux_signals import (
    DEFAULT_STALE_S,
    Probe,
    hook_says_busy,
    open_store_port,
    session_file,
    submitted,
    turn_state,
)
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed, StoreError
from agentmaild.models import Agent, Batch
from agentmaild.store.location import StoreLocation
from agentmaild.store.ports import Port

log: FilteringBoundLogger = structlog.get_logger(__name__)

_POLL_S = 0.05
_FAILED = (AgentUnavailable, DeliveryFailed)  # what a tmux call raises
# One lock per pane per process: two channel instances (a reloaded loop, a test) never interleave.
_PANE_LOCKS: dict[tuple[str, str], anyio.Lock] = {}


def pane_lock(socket: str, target: str) -> anyio.Lock:
    return _PANE_LOCKS.setdefault((socket, target), anyio.Lock())


class TmuxChannel(Channel):
    """Delivers into ``agent.tmux_target`` on the tmux server ``agent.tmux_socket``."""

    kind = "tmux"
    interruptible = True

    def __init__(self, agent: Agent, config: Config, store: StoreLocation | Path) -> None:
        if not agent.tmux_target:
            raise AgentUnavailable(f"agent {agent.name!r} has no tmux target")
        self.agent = agent
        self.target = agent.tmux_target
        self.socket = agent.tmux_socket or ""
        self.location = StoreLocation.of(store)
        self.store_path = self.location.local_path.absolute()
        self._tmux = config.tmux
        self._cmd = TmuxCommand(self.target, self.socket)
        settings = agent.settings
        self._home = Path(str(settings.get("home") or os.environ.get("HOME") or Path.home()))
        self._glyph = str(settings.get("prompt_glyph") or "\u276f")
        stale = settings.get("turn_state_stale_s")
        self._stale_s = float(stale) if isinstance(stale, int | float) else DEFAULT_STALE_S
        self._lock = pane_lock(self.socket, self.target)
        self._db_limiter = anyio.CapacityLimiter(1)
        self._port: Port | None = None  # the store's, for the hooks' records (opened on use)
        self._closed = False
        self._unavailable: str | None = None
        self._signals: dict[str, Any] = {}
        self._last: dict[str, Any] = {}
        self._log = log.bind(agent=agent.name, channel=self.kind, target=self.target)

    # -- the Channel API --------------------------------------------------------------------
    async def is_busy(self) -> bool:
        try:
            probe = await self._probe()
        except AgentUnavailable:
            return False  # deliver() raises it again: the loop releases and backs off
        return probe.busy

    async def deliver(self, batch: Batch, text: str) -> None:
        if self._closed:
            raise AgentUnavailable("tmux channel is closed")
        bound = self._log.bind(delivery_id=batch.delivery_id, attempt=batch.attempt)
        async with self._lock:
            if await self._already_submitted(batch.delivery_id):
                bound.info("tmux.already_submitted")
                self._last = {"delivery_id": batch.delivery_id, "verified_by": "earlier"}
                return
            # Re-checked under the lock, right before typing: never into a busy pane or a dialog.
            probe = await self._probe()
            if probe.busy:
                raise AgentBusy(
                    f"pane {self.target} is busy ({', '.join(probe.reasons)}); not typed into"
                )
            await self._paste(batch.delivery_id, text)
            await self._submit_or_clear(batch.delivery_id, bound)

    async def interrupt(self) -> str:
        async with self._lock:  # never between a paste and its Enter
            return await stop_turn(self._cmd, self._composer, self._clear_composer,
                                   self._tmux.verify_timeout_s)  # fmt: skip

    async def aclose(self) -> None:
        self._closed = True
        port, self._port = self._port, None
        if port is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(port.close, limiter=self._db_limiter)

    def busy_reason(self) -> str | None:
        reasons = self._signals.get("busy_reasons")
        return ", ".join(reasons) if reasons else None

    def describe(self) -> dict[str, object]:
        return {"target": self.target, "socket": self.socket or None,
                "unavailable": self._unavailable, "signals": self._signals,
                "last_submission": self._last}  # fmt: skip

    # -- busy signals -----------------------------------------------------------------------
    async def _probe(self) -> Probe:
        try:
            pid, composer, in_mode = await self._look()
        except AgentUnavailable as exc:
            self._unavailable = exc.message
            raise
        self._unavailable = None
        hook_state, hook_at = await self._db(turn_state, self.agent.name) or (None, None)
        status, status_at = await anyio.to_thread.run_sync(session_file, self._home, pid)
        probe = Probe(pane_pid=pid, composer=composer, hook_state=hook_state, session_status=status)
        if in_mode:
            probe.reasons.append("pane:in-mode")
        if composer is None:
            probe.reasons.append("pane:no-composer")
        else:
            if composer.text:
                probe.reasons.append("pane:composer-not-empty")
            if busy_footer(composer):
                probe.reasons.append("pane:busy-footer")
        if status is not None and status != "idle":
            probe.reasons.append(f"session:{status}")
        if hook_says_busy(hook_state, hook_at, status, status_at, self._stale_s):
            probe.reasons.append(f"hook:{hook_state}")
        self._signals = probe.signals()
        return probe

    async def _look(self) -> tuple[int, Composer | None, bool]:
        fmt = "#{pane_pid}\t#{pane_dead}\t#{pane_in_mode}\t#{pane_dead_status}"
        fields = (await self._cmd.run("display-message", "-p", "-t", self.target, fmt)).split("\t")
        if len(fields) != 4 or not fields[0].strip().isdigit():
            raise AgentUnavailable(f"pane {self.target} not found ({self._cmd.where()})")
        if fields[1].strip() == "1":
            screen = await self._cmd.run("capture-pane", "-p", "-S", "-200", "-t", self.target)
            raise AgentUnavailable(dead_pane(self.target, self._cmd.where(), fields[3], screen))
        return int(fields[0]), await self._composer(), fields[2].strip() == "1"

    async def _composer(self) -> Composer | None:
        screen = await self._cmd.run("capture-pane", "-p", "-t", self.target)
        return parse_screen(screen, self._glyph)

    # -- paste, Enter, verify ---------------------------------------------------------------
    async def _paste(self, delivery_id: str, text: str) -> None:
        buffer = f"agentmaild-{self.agent.name}-{delivery_id}"
        data = terminal_safe(text).rstrip("\n").encode()
        await self._cmd.run("load-buffer", "-b", buffer, "-", stdin=data)
        try:
            # -p: bracketed paste, so newlines stay text; -r: LF is not turned into CR (Enter)
            # for a program that did not ask for bracketed paste; -d: the buffer goes with it.
            await self._cmd.run("paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", self.target)
        except BaseException:
            with anyio.CancelScope(shield=True), suppress(*_FAILED):
                await self._cmd.run("delete-buffer", "-b", buffer)
            raise

    async def _submit_or_clear(self, delivery_id: str, bound: FilteringBoundLogger) -> None:
        verified: str | None = None
        try:
            verified = await self._submit(delivery_id, bound)
        finally:
            if verified is None:
                # Cancelled or unverified: leave no half-delivered text for a human to send.
                cleared = False
                with anyio.CancelScope(shield=True), anyio.move_on_after(3), suppress(*_FAILED):
                    cleared = await self._clear_composer()
                bound.warning("tmux.unverified", cleared=cleared, signals=self._signals)
        self._last = {"delivery_id": delivery_id, "verified_by": verified}
        if verified is None:
            raise DeliveryFailed(
                f"submission to pane {self.target} not verified within "
                f"{self._tmux.verify_timeout_s:g}s; composer cleared"
            )
        bound.info("tmux.submitted", verified_by=verified)

    async def _submit(self, delivery_id: str, bound: FilteringBoundLogger) -> str | None:
        deadline = anyio.current_time() + self._tmux.verify_timeout_s
        await anyio.sleep(self._tmux.paste_settle_s)
        window = max(self._tmux.paste_settle_s, 0.1)
        for attempt in range(self._tmux.enter_retries + 1):
            if attempt == 0 or await self._enter_not_taken():
                if attempt:
                    bound.info("tmux.enter_retried", attempt=attempt)
                await self._cmd.run("send-keys", "-t", self.target, "Enter")
            last = attempt == self._tmux.enter_retries
            until = deadline if last else min(deadline, anyio.current_time() + window)
            verified = await self._wait_verified(delivery_id, until)
            if verified is not None or anyio.current_time() >= deadline:
                return verified
            window *= 2
        return None

    async def _enter_not_taken(self) -> bool:
        """Our text still waits in an idle composer: the Enter was lost, press it again."""
        composer = await self._composer()
        return composer is not None and bool(composer.text) and not busy_footer(composer)

    async def _wait_verified(self, delivery_id: str, until: float) -> str | None:
        while True:
            if await self._db(submitted, delivery_id):
                return "hook"
            composer = await self._composer()
            if (
                composer is not None
                and not composer.text
                and (busy_footer(composer) or composer.transcript_mentions(delivery_id))
            ):
                return "pane"
            if anyio.current_time() >= until:
                return None
            await anyio.sleep(_POLL_S)

    async def _already_submitted(self, delivery_id: str) -> bool:
        if await self._db(submitted, delivery_id):
            return True
        try:
            composer = await self._composer()
        except AgentUnavailable:
            return False  # the probe that follows reports it
        return composer is not None and composer.transcript_mentions(delivery_id)

    async def _clear_composer(self) -> bool:
        """Claude clears its composer on a second Escape ("esc again to clear"). Escape only
        while text is there and no turn runs: on an empty composer a double Escape opens the
        rewind menu, and during a turn Escape interrupts it."""
        for _ in range(4):
            composer = await self._composer()
            if composer is None or busy_footer(composer):
                return False
            if not composer.text:
                return True
            await self._cmd.run("send-keys", "-t", self.target, "Escape")
            await anyio.sleep(max(self._tmux.paste_settle_s, 0.1))
        composer = await self._composer()
        return composer is not None and not composer.text

    # -- store reads ------------------------------------------------------------------------
    async def _db(self, fn: Any, *args: Any) -> Any:
        def call() -> Any:
            if self._port is None:
                self._port = open_store_port(self.location)
            return fn(self._port, *args)

        try:
            return await anyio.to_thread.run_sync(call, limiter=self._db_limiter)
        except StoreError as exc:  # the store is the daemon's; a failed read is "unknown"
            self._log.warning("tmux.store_read_failed", error=str(exc))
            return None
