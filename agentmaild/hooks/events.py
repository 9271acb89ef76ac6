"""The hook's handlers for every event but UserPromptSubmit and PreToolUse (those stay in ``run``).

SessionStart, PostToolUse (mid-turn mail by policy: ``midturn``), Stop (mail by ``decision:
block``, bounded), PermissionRequest, Notification and SessionEnd. Loaded by ``Hook.run`` only
for these events, so the per-prompt path imports nothing more; stdlib only, like ``run``.
"""

from __future__ import annotations

from agentmaild.hooks.io import env_float
from agentmaild.render import inject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from agentmaild.hooks.run import Hook



def session_start(hook: Hook) -> int:
    if hook.text("source") == "compact":  # fired mid-turn after an automatic compaction
        return hook.in_write(lambda: hook.deliver(hook.context()))

    def work() -> None:
        hook.set_state("idle")
        _release_mid_turn(hook)
        hook.deliver(hook.context())

    return hook.in_write(work, poke=True)


def _release_mid_turn(hook: Hook) -> None:
    """Gemini: mid-turn mail held for a turn that never reached AfterAgent goes back."""
    if hook.vendor == "gemini":
        from agentmaild.hooks import deferred

        deferred.settle_mid_turn(hook, took=False)


def post_tool_use(hook: Hook) -> int:
    """Mid-turn mail by ``mid_turn_priority`` (``hooks.midturn``), also in the daemon's turns."""
    if hook.data.get("agent_id"):  # a subagent's
        return 0
    if not hook.quiet and hook.turn_state() == "waiting":
        hook.in_write(lambda: hook.set_state("busy", only_from="waiting"))
    from agentmaild.hooks import midturn

    return midturn.deliver(hook)


def stop(hook: Hook) -> int:
    if _stop_with_mail(hook):
        return 0  # blocking the stop handed mail over and the turn goes on: still busy
    held: list[str] = []
    if hook.vendor == "gemini":  # AfterAgent: the model answered the turn that held this mail
        from agentmaild.hooks import deferred

        held = deferred.take_held(hook)

    def work() -> None:
        if held:
            hook.mark_delivered(held)
        if hook.vendor == "gemini":
            from agentmaild.hooks import deferred

            deferred.settle_mid_turn(hook, took=True)
        hook.set_state("idle")

    return hook.in_write(work, poke=True)


def _stop_with_mail(hook: Hook) -> bool:
    """Deliver by ``decision: block``, at most STOP_BLOCK_MAX times in a row (0: never)."""
    limit = int(env_float("AGENTMAILD_HOOKS_STOP_BLOCK_MAX", 0))
    if limit <= 0 or hook.vendor != "claude" or hook.quiet or not hook.has_unread():
        return False
    from agentmaild.hooks import state as hooks_state

    marker = hooks_state.marker_path(hook.db_path or "", hook.agent, "stop-blocks")
    active = hook.data.get("stop_hook_active") is True
    blocks = hooks_state.read_int(marker) if active else 0
    if blocks >= limit:
        return False
    count = hooks_state.write_int(marker, blocks + 1)
    delivered = False

    def work() -> None:
        nonlocal delivered
        delivered = hook.deliver(inject.stop_block_json, before_ack=count)

    hook.in_write(work)
    return delivered


def permission_request(hook: Hook) -> int:
    return hook.in_write(lambda: hook.set_state("waiting"))


def notification(hook: Hook) -> int:
    return hook.in_write(lambda: hook.set_state("waiting"))


def session_end(hook: Hook) -> int:
    return hook.in_write(lambda: hook.set_state("gone"))


HANDLERS: dict[str, Callable[[Hook], int]] = {
    "SessionStart": session_start,
    "PostToolUse": post_tool_use,
    "Stop": stop,
    "PermissionRequest": permission_request,
    "Notification": notification,
    "SessionEnd": session_end,
}
