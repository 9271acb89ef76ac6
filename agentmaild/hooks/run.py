"""Claude Code hooks: the fast ``agentmaild hook EVENT`` entry point and its ``Hook`` plumbing.

UserPromptSubmit and PreToolUse are handled here; the other events' handlers live in ``events``
(loaded only for them); the guard, the marker files and hook log, and the settings installer live
in ``guard``, ``state`` and ``install``.

``run_hook`` runs on every prompt and tool call, so it is stdlib only (no typer, structlog,
asyncio or dataclasses; sqlite3 and the store helpers load only for events that need the store)
and it never breaks the session: on an internal error it prints nothing, appends one line to
``<store dir>/logs/hooks.log`` (else ``$XDG_STATE_HOME/agentmaild/hooks.log``) and exits 0.

What each event does (the agent is ``--agent``, else ``$AGENTMAIL_AGENT``):

- turn state in ``am_agents.turn_state``/``turn_state_at``: UserPromptSubmit → busy, Stop → idle,
  SessionStart (not after a compaction) → idle, PermissionRequest and a ``permission_prompt`` /
  ``elicitation_dialog`` Notification → waiting, SessionEnd → gone; PostToolUse turns a
  ``waiting`` agent back to busy (the dialog was answered).
- Claude's ``session_id`` goes to ``am_agents.session_id`` (not ``settings``: a settings change
  restarts the agent's delivery loop). Interactive agents (tmux, pull) always take the latest id,
  so ``/clear`` is followed; for daemon-owned sessions (spawn, stdin) it only fills an empty one.
- SessionStart and UserPromptSubmit print unread mail (PRIORITY banner first) as context and ack
  what they printed; PostToolUse does the same mid-turn as ``hookSpecificOutput.additionalContext``
  JSON, at most once per ``AGENTMAILD_HOOKS_POST_TOOL_USE_DEBOUNCE_S`` (default 30 s). The last
  mid-turn delivery time is the mtime of ``<store dir>/hooks/<agent>.mid-turn``: a stat, no write
  to the store. Stop may deliver by ``decision: block`` at most ``AGENTMAILD_HOOKS_STOP_BLOCK_MAX``
  times in a row (default 0: never). Only these ``AGENTMAILD_HOOKS_*`` environment variables are
  read: loading ``config.py`` would cost ~10 ms per call, so ``[hooks]`` keys set in the config
  file alone do not reach the hook.
- Output stays under ``AGENTMAILD_HOOKS_OUTPUT_MAX_CHARS`` (at most 10 000, Claude Code's cap,
  counted in UTF-16 units as Claude counts); mail that does not fit stays unread for next time.
  Output is written before the ack commits, so a failed write leaves the mail unread.
- With ``AGENTMAIL_DELIVERY`` set (a turn the daemon started) nothing is delivered; state is.
- A prompt holding a batch header ``[agentmail] … (delivery dlv-…)`` was pasted by the tmux
  channel: the delivery id goes to ``am_prompt_seen`` (the channel asks ``Port.delivery_seen``)
  and no mail is printed, since the daemon acks that batch itself.
- PreToolUse on Bash blocks a command that polls for mail in a loop (exit 2, reason on stderr).
"""

from __future__ import annotations

import json
import os
import re
import sys

from agentmaild.hooks.io import (
    notification_waits,
    output_limit,
    parse_opts,
    poke_daemon,
    read_stdin,
)
from agentmaild.render import inject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, BinaryIO

    from agentmaild.store.ports import Port

EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "pre-tool-use": "PreToolUse",
    "post-tool-use": "PostToolUse",
    "stop": "Stop",
    "permission-request": "PermissionRequest",
    "notification": "Notification",
    "session-end": "SessionEnd",
}
_BY_NAME = {k.replace("-", ""): v for k, v in EVENTS.items()}
SEEN_KEEP_S = 7 * 86400.0
# Patterns stay strings, compiled (and cached by re) on first use: every compile at import
# would cost each hook call, and most calls need none of them.
_SESSION_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
# The header render.render_batch writes; the banner may precede it, so any line may hold it.
HEADER_RE = r"(?m)^[ \t]*\[agentmail\] [^\n]*?\(delivery (dlv-[a-z0-9]{6,40})\)"


def canonical_event(event: str) -> str | None:
    """``user-prompt-submit``, ``UserPromptSubmit`` or ``user_prompt_submit`` (any case)."""
    key = event.strip().lower()
    return EVENTS.get(key) or _BY_NAME.get(key.replace("_", "").replace("-", ""))


# -- entry point ----------------------------------------------------------------------------
def run_hook(event: str, argv: Sequence[str]) -> int:
    """``agentmaild hook EVENT [--agent NAME] [--db PATH]`` with the hook JSON on stdin."""
    hook = Hook(event, argv)
    try:
        return hook.run()
    except Exception as exc:  # the boundary: a hook must never break the user's session
        _log_line(hook.db_path, "hook.failed", hook, exc)
        return 0


class Hook:
    __slots__ = (
        "agent", "data", "db_flag", "db_path", "event", "name", "out", "poke", "port", "quiet",
        "raw", "vendor",
    )  # fmt: skip

    def __init__(self, event: str, argv: Sequence[str]) -> None:
        self.event = event
        self.name = canonical_event(event)
        opts = parse_opts(argv)
        self.agent = opts.get("agent") or os.environ.get("AGENTMAIL_AGENT") or ""
        self.db_flag = opts.get("db")
        self.vendor = opts.get("vendor") or "claude"  # the output shape (see ``context``)
        self.db_path: str | None = None
        self.quiet = bool(os.environ.get("AGENTMAIL_DELIVERY"))
        self.data: dict[str, Any] = {}
        self.raw = b""
        self.port: Port | None = None
        self.out: BinaryIO = sys.stdout.buffer
        self.poke: Callable[[], None] | None = None  # None: poke the daemon's control socket

    def run(self) -> int:
        self.raw = read_stdin()
        if self.name is None:
            _log_line(None, "hook.unknown_event", self, None)
            return 0
        # PostToolUse's payload holds the tool's whole output: parsed only when it may come from
        # a subagent (mail put into a subagent's context would never reach the agent itself).
        if self.name != "PostToolUse" or b'"agent_id"' in self.raw:
            self.data = self._parse()
        if self.name == "PreToolUse":
            return self.pre_tool_use()
        if not self.agent or not self._wants_store():
            return 0
        from agentmaild.ids import check_name

        if os.environ.get("AGENTMAIL_URL"):  # the daemon's HTTP API instead of the store file
            check_name(self.agent)
            from agentmaild.hooks.remote import run_remote

            return run_remote(self)
        from agentmaild.overstory.flavor import overstory_mode
        from agentmaild.store.kinds import open_port
        from agentmaild.store.location import resolve_location

        start = os.environ.get("CLAUDE_PROJECT_DIR") or None
        location = resolve_location(self.db_flag, start=start)
        self.db_path = location.local  # hooks.log and the marker files go beside it
        check_name(self.agent, loose=overstory_mode(location.target))
        self.port = open_port(location, poke_daemon)
        if self.port is None:
            return 0  # no store yet: nobody can have mail or a registration
        try:
            return self.dispatch()
        finally:
            self.port.done()

    def dispatch(self) -> int:
        """The event's work on ``self.port`` (the hook's own, or the daemon's for an API call)."""
        if self.name == "UserPromptSubmit":  # the common path loads no handler module
            return self.user_prompt_submit()
        from agentmaild.hooks.events import HANDLERS

        return HANDLERS[self.name or ""](self)

    def _parse(self) -> dict[str, Any]:
        if not self.raw.strip():
            return {}
        try:
            data = json.loads(self.raw)
        except (ValueError, RecursionError) as exc:  # not JSON, or absurdly nested: no data
            _log_line(None, "hook.bad_input", self, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def _wants_store(self) -> bool:
        if self.name == "Notification":
            return notification_waits(self.data)
        return True

    def text(self, key: str) -> str:
        value = self.data.get(key)
        return value if isinstance(value, str) else ""

    # -- events -----------------------------------------------------------------------------
    def pre_tool_use(self) -> int:
        from agentmaild.hooks.guard import refusal

        reason = refusal(self.data, self.agent)
        if reason is None:
            return 0
        sys.stderr.write(reason + "\n")
        return 2

    def user_prompt_submit(self) -> int:
        def work() -> None:
            self.set_state("busy")
            if self.vendor == "gemini":  # a turn that never reached AfterAgent gives its
                from agentmaild.hooks import deferred  # mid-turn mail back

                deferred.settle_mid_turn(self, took=False)
            seen = re.findall(HEADER_RE, self.text("prompt"))
            if seen:
                self._record_seen(seen)
            elif not self.deliver(self.context()) and self.vendor == "gemini":
                from agentmaild.hooks import deferred

                deferred.turn_began(self)

        return self.in_write(work)

    def context(self) -> Callable[[str], str]:
        """How delivered mail is printed for ``--vendor`` (see ``inject.vendor_wrap``)."""
        return inject.vendor_wrap(self.vendor, self.name or "")

    # -- store work -------------------------------------------------------------------------
    def store(self) -> Port:
        """The port the store handed out (``store.ports``): all of this hook's store work."""
        assert self.port is not None
        return self.port

    def in_write(self, work: Callable[[], object], *, poke: bool = False) -> int:
        """``work`` in one write; ``poke``: the agent's daemon hears of it at commit."""
        wake = poke and not self.quiet
        self.store().write(work, wake=self.agent if wake else "")
        if wake and self.poke is not None:  # the daemon serving this hook wakes its own loop
            self.poke()
        return 0

    def set_state(self, state: str, *, only_from: str | None = None) -> None:
        sid = self.text("session_id")
        sid = sid if re.match(_SESSION_RE, sid) else ""
        self.store().set_state(self.agent, state, sid, only_from)

    def _record_seen(self, delivery_ids: list[str]) -> None:
        sid = self.text("session_id") or None
        self.store().record_seen(self.agent, sid, delivery_ids, SEEN_KEEP_S)

    def turn_state(self) -> str | None:
        return self.store().turn(self.agent)[0]

    def has_unread(self) -> bool:
        return self.store().has_unread(self.agent)

    def deliver(
        self, wrap: Callable[[str], str], before_ack: Callable[[], None] | None = None
    ) -> bool:
        """In the caller's write transaction: take, render, write, then mark what was written."""
        if self.quiet:
            return False
        taken = self.take(wrap)
        if taken is None:
            return False
        out, ids = taken
        if before_ack is not None:
            before_ack()
        self.out.write(out.encode("utf-8"))
        self.out.flush()
        if self.vendor == "gemini":  # acked by AfterAgent, once the model answered
            from agentmaild.hooks import deferred

            deferred.hold(self, ids)
        else:
            self.mark_delivered(ids)
        return True

    def take(self, wrap: Callable[[str], str]) -> tuple[str, list[str]] | None:
        """The unread mail that fits, rendered: (output, its ids); None when there is none."""
        from agentmaild.store.ports import INJECT_RESERVE

        limit = output_limit()
        taken = self.store().take(self.agent, limit - INJECT_RESERVE, self._unprinted)
        if taken is None:
            return None
        rows, unread, nudges, lead = taken  # lead: Overstory's pending-nudge banner, if any
        return inject.fit_rows(rows, self.agent, unread, nudges, wrap, limit, lead)

    def _unprinted(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.vendor != "gemini":
            return rows
        from agentmaild.hooks import deferred

        return deferred.skip_printed(self, rows)

    def mark_delivered(self, ids: list[str]) -> None:
        self.store().mark_read(self.agent, ids, "hook")


def _log_line(db_path: str | None, what: str, hook: Hook, exc: BaseException | None) -> None:
    """One line in ``hooks.log`` (see ``hooks_state.log_line``); never raises."""
    from agentmaild.hooks.state import log_line

    db = db_path or hook.db_path or hook.db_flag
    log_line(db, what, event=hook.event, agent=hook.agent, exc=exc)
