"""Stopping the turn that runs in an interactive agent's tmux pane: the TUI's own interrupt key.

Claude Code stops a running turn on Escape (its footer says "esc to interrupt" meanwhile). The key
is pressed only while that footer shows, so it can never clear a composer someone is typing in or
open the rewind menu of an idle one; the proof is the screen: the footer gone, the composer back.
A press the TUI missed is repeated once a second until ``bound_s``. A turn stopped before the
model answered puts its prompt back into the composer (Claude Code does): it is cleared, or the
pane would look busy (a composer with text) until someone emptied it; the TUI's input history
(the up arrow) still holds it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from agentmaild.channels.tmux_cmd import TmuxCommand
from agentmaild.channels.tmux_screen import Composer, busy_footer
from agentmaild.errors import DeliveryFailed

INTERRUPT_KEY = "Escape"
_REPRESS_S = 1.0
_PUT_BACK_S = 0.5  # the prompt Claude puts back shows a moment after the footer goes
_POLL_S = 0.05


async def stop_turn(
    cmd: TmuxCommand,
    composer: Callable[[], Awaitable[Composer | None]],
    clear: Callable[[], Awaitable[bool]],
    bound_s: float,
) -> str:
    """Press the interrupt key until the pane shows no running turn; how it went."""
    shown = await composer()
    if shown is None or not busy_footer(shown):
        raise DeliveryFailed(f"no turn runs in pane {cmd.target} (no busy footer)")
    deadline = anyio.current_time() + bound_s
    presses = 0
    while anyio.current_time() < deadline:
        await cmd.run("send-keys", "-t", cmd.target, INTERRUPT_KEY)
        presses += 1
        until = min(deadline, anyio.current_time() + _REPRESS_S)
        while anyio.current_time() < until:
            await anyio.sleep(_POLL_S)
            shown = await composer()
            if shown is not None and not busy_footer(shown):
                how = f"{INTERRUPT_KEY} x{presses}: the pane shows the turn stopped"
                text = await _put_back(composer)
                if text and await clear():
                    how += f"; its unanswered prompt ({len(text)} chars) cleared"
                return how
    raise DeliveryFailed(f"pane {cmd.target} still shows a running turn {bound_s:g}s after "
                         f"{presses} x {INTERRUPT_KEY}")  # fmt: skip


async def _put_back(composer: Callable[[], Awaitable[Composer | None]]) -> str:
    """The text the composer shows within ``_PUT_BACK_S`` of the stop ("" if none)."""
    until = anyio.current_time() + _PUT_BACK_S
    while True:
        shown = await composer()
        if shown is not None and shown.text:
            return shown.text
        if anyio.current_time() >= until:
            return ""
        await anyio.sleep(_POLL_S)
