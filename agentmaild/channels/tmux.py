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
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import time
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog
from structlog.typing import FilteringBoundLogger

from agentmaild.channels.base import Channel
from agentmaild.config import Config
from agentmaild.errors import AgentBusy, AgentUnavailable, DeliveryFailed
from agentmaild.hooks import delivery_seen
from agentmaild.models import Agent, Batch

log: FilteringBoundLogger = structlog.get_logger(__name__)

TMUX_CALL_TIMEOUT_S = 10.0
DEFAULT_STALE_S = 900.0
_POLL_S = 0.05
_HOOK_BUSY = frozenset({"busy", "waiting"})
# What tmux prints when the server, session or pane is not there.
_GONE_MARKERS = (
    "can't find",
    "no server running",
    "error connecting",
    "server exited",
    "lost server",
    "no such file",
    "connection refused",
    "no current target",
    "session not found",
    "pane not found",
)

# Control characters would leave the bracketed paste (ESC[201~) and turn text into keys.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

# One lock per pane per process: two channel instances (a reloaded loop, a test) never interleave.
_PANE_LOCKS: dict[tuple[str, str], anyio.Lock] = {}


def pane_lock(socket: str, target: str) -> anyio.Lock:
    return _PANE_LOCKS.setdefault((socket, target), anyio.Lock())


def terminal_safe(text: str) -> str:
    """The text as pasted: line ends as LF, other control characters spelled ``\\xNN``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def tmux_base(socket: str | None) -> list[str]:
    """``tmux -L NAME`` for a server name, ``tmux -S PATH`` for a socket path, else plain tmux."""
    if not socket:
        return ["tmux"]
    return ["tmux", "-S", socket] if "/" in socket else ["tmux", "-L", socket]


@dataclass(slots=True)
class Probe:
    """One look at every busy signal; ``reasons`` lists the ones that say busy."""

    pane_pid: int
    composer: Composer | None
    hook_state: str | None = None
    session_status: str | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return bool(self.reasons)

    def signals(self) -> dict[str, Any]:
        return {
            "hook_state": self.hook_state,
            "session_status": self.session_status,
            "composer": None
            if self.composer is None
            else ("empty" if not self.composer.text else "text"),
            "busy_reasons": list(self.reasons),
        }


class TmuxChannel(Channel):
    """Delivers into ``agent.tmux_target`` on the tmux server ``agent.tmux_socket``."""

    kind = "tmux"

    def __init__(self, agent: Agent, config: Config, store_path: Path) -> None:
        if not agent.tmux_target:
            raise AgentUnavailable(f"agent {agent.name!r} has no tmux target")
        self.agent = agent
        self.target = agent.tmux_target
        self.socket = agent.tmux_socket or ""
        self.store_path = store_path.absolute()
        self._tmux = config.tmux
        self._base = tmux_base(agent.tmux_socket)
        settings = agent.settings
        self._home = Path(str(settings.get("home") or os.environ.get("HOME") or Path.home()))
        self._glyph = str(settings.get("prompt_glyph") or "\u276f")
        stale = settings.get("turn_state_stale_s")
        self._stale_s = float(stale) if isinstance(stale, int | float) else DEFAULT_STALE_S
        self._lock = pane_lock(self.socket, self.target)
        self._db_limiter = anyio.CapacityLimiter(1)
        self._conn: sqlite3.Connection | None = None
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

    async def aclose(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(conn.close, limiter=self._db_limiter)

    def describe(self) -> dict[str, object]:
        return {
            "target": self.target,
            "socket": self.socket or None,
            "unavailable": self._unavailable,
            "signals": self._signals,
            "last_submission": self._last,
        }

    # -- busy signals -----------------------------------------------------------------------
    async def _probe(self) -> Probe:
        try:
            pid, composer, in_mode = await self._look()
        except AgentUnavailable as exc:
            self._unavailable = exc.message
            raise
        self._unavailable = None
        hook_state, hook_at = await self._db(self._turn_state) or (None, None)
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
        if self._hook_says_busy(hook_state, hook_at, status, status_at):
            probe.reasons.append(f"hook:{hook_state}")
        self._signals = probe.signals()
        return probe

    def _hook_says_busy(
        self, state: str | None, at: float | None, status: str | None, status_at: float | None
    ) -> bool:
        if state not in _HOOK_BUSY or at is None:
            return False
        if time.time() - at > self._stale_s:
            return False  # a hook that never reported the turn's end must not block forever
        # Esc-interrupted turns fire no Stop hook; Claude's own later "idle" wins.
        return not (status == "idle" and status_at is not None and status_at > at)

    async def _look(self) -> tuple[int, Composer | None, bool]:
        fmt = "#{pane_pid}\t#{pane_dead}\t#{pane_in_mode}"
        fields = (await self._run("display-message", "-p", "-t", self.target, fmt)).split("\t")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            raise AgentUnavailable(f"pane {self.target} not found ({self._where()})")
        if fields[1].strip() == "1":
            raise AgentUnavailable(f"pane {self.target} is dead ({self._where()})")
        return int(fields[0]), await self._composer(), fields[2].strip() == "1"

    async def _composer(self) -> Composer | None:
        return parse_screen(await self._run("capture-pane", "-p", "-t", self.target), self._glyph)

    # -- paste, Enter, verify ---------------------------------------------------------------
    async def _paste(self, delivery_id: str, text: str) -> None:
        buffer = f"agentmaild-{self.agent.name}-{delivery_id}"
        data = terminal_safe(text).rstrip("\n").encode()
        await self._run("load-buffer", "-b", buffer, "-", stdin=data)
        try:
            # -p: bracketed paste, so newlines stay text; -r: LF is not turned into CR (Enter)
            # for a program that did not ask for bracketed paste; -d: the buffer goes with it.
            await self._run("paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", self.target)
        except BaseException:
            with anyio.CancelScope(shield=True), suppress(AgentUnavailable, DeliveryFailed):
                await self._run("delete-buffer", "-b", buffer)
            raise

    async def _submit_or_clear(self, delivery_id: str, bound: FilteringBoundLogger) -> None:
        verified: str | None = None
        try:
            verified = await self._submit(delivery_id, bound)
        finally:
            if verified is None:
                # Cancelled or unverified: leave no half-delivered text for a human to send.
                cleared = False
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(3),
                    suppress(AgentUnavailable, DeliveryFailed),
                ):
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
                await self._run("send-keys", "-t", self.target, "Enter")
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
            if await self._db(delivery_seen, delivery_id):
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
        if await self._db(delivery_seen, delivery_id):
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
            await self._run("send-keys", "-t", self.target, "Escape")
            await anyio.sleep(max(self._tmux.paste_settle_s, 0.1))
        composer = await self._composer()
        return composer is not None and not composer.text

    # -- plumbing ---------------------------------------------------------------------------
    async def _run(self, *args: str, stdin: bytes | None = None) -> str:
        argv = [*self._base, *args]
        try:
            with anyio.fail_after(TMUX_CALL_TIMEOUT_S):
                done = await anyio.run_process(argv, input=stdin, check=False)
        except OSError as exc:
            raise AgentUnavailable(f"cannot run tmux: {exc.strerror or exc}") from exc
        except TimeoutError as exc:
            raise AgentUnavailable(f"tmux {args[0]} did not answer ({self._where()})") from exc
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()
            if any(marker in err.lower() for marker in _GONE_MARKERS):
                raise AgentUnavailable(f"pane {self.target} not found ({self._where()}): {err}")
            raise DeliveryFailed(f"tmux {args[0]} failed: {err or f'exit {done.returncode}'}")
        return done.stdout.decode("utf-8", "replace")

    def _where(self) -> str:
        return f"tmux server {self.socket}" if self.socket else "default tmux server"

    async def _db(self, fn: Any, *args: Any) -> Any:
        def call() -> Any:
            if self._conn is None:
                self._conn = sqlite3.connect(
                    str(self.store_path), timeout=2.0, check_same_thread=False
                )
            return fn(self._conn, *args)

        try:
            return await anyio.to_thread.run_sync(call, limiter=self._db_limiter)
        except sqlite3.Error as exc:  # the store is the daemon's; a failed read is "unknown"
            self._log.warning("tmux.store_read_failed", error=str(exc))
            return None

    def _turn_state(self, conn: sqlite3.Connection) -> tuple[str | None, float | None]:
        row = conn.execute(
            "SELECT turn_state, turn_state_at FROM am_agents WHERE name = ?", (self.agent.name,)
        ).fetchone()
        if row is None or row[0] is None:
            return None, None
        return row[0], _instant(row[1])


def _instant(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


# -- what the pane shows --------------------------------------------------------------------
BUSY_FOOTER = "esc to interrupt"
_RULE = "\u2500"


@dataclass(frozen=True, slots=True)
class Composer:
    """Claude Code's input box: the prompt glyph between two rule lines."""

    text: str  # what is typed, whitespace (NBSP included) stripped; "" when empty
    transcript: tuple[str, ...]  # the lines above the box
    footer: tuple[str, ...]  # the lines below it

    def transcript_mentions(self, needle: str) -> bool:
        return any(needle in line for line in self.transcript)


def _is_rule(line: str) -> bool:
    return line.strip().startswith(_RULE * 3) and line.count(_RULE) >= 10


def parse_screen(screen: str, glyph: str = "\u276f") -> Composer | None:
    """The lowest composer on the screen, or None (a dialog replaced it, or no TUI runs)."""
    lines = screen.splitlines()
    rules = [i for i, line in enumerate(lines) if _is_rule(line)]
    for top, bottom in reversed(list(itertools.pairwise(rules))):
        first = lines[top + 1].lstrip() if bottom - top >= 2 else ""
        if first.startswith(glyph):
            body = [first[len(glyph) :], *lines[top + 2 : bottom]]
            text = "\n".join(line.strip() for line in body).strip()
            return Composer(text, tuple(lines[:top]), tuple(lines[bottom + 1 :]))
    return None


def busy_footer(composer: Composer) -> bool:
    """Only the footer counts: a transcript may quote the words."""
    return any(BUSY_FOOTER in line for line in composer.footer)


def session_file(home: Path, pane_pid: int) -> tuple[str | None, float | None]:
    """``status`` and its time (epoch s) from the Claude session file of the pane's process or a
    descendant of it; (None, None) when there is none."""
    folder = home / ".claude" / "sessions"
    try:
        names = [p for p in folder.iterdir() if p.suffix == ".json" and p.stem.isdigit()]
    except OSError:
        return None, None
    for path in names:
        if int(path.stem) == pane_pid or _descends(int(path.stem), pane_pid):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            status = data.get("status") if isinstance(data, dict) else None
            if isinstance(status, str):
                at = data.get("statusUpdatedAt") or data.get("updatedAt")
                return status, at / 1000 if isinstance(at, int | float) else None
    return None, None


def _descends(pid: int, ancestor: int, depth: int = 32) -> bool:
    """Walk ``/proc`` parents (Linux); elsewhere only the pane's own pid matches."""
    for _ in range(depth):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
    return False
