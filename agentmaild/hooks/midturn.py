"""PostToolUse's mid-turn delivery: the mail ``mid_turn_priority`` lets into a running turn,
handed over as the hook's ``additionalContext`` under a delivery of its own (``store.midturn``).

The policy is the agent's ``mid_turn_priority`` setting (``agents add|update
--mid-turn-priority``), else ``$AGENTMAILD_DELIVERY_MID_TURN_PRIORITY`` (the daemon puts its
``[delivery]`` value into every turn it starts), else ``high``: urgent and high mail go into the
running turn, normal and low wait for its end. Urgent and high go at the first tool call after
they arrive; normal and low (policy ``all``) at most once per ``AGENTMAILD_HOOKS_POST_TOOL_USE_
DEBOUNCE_S``. The batch is acked once the output is written (the hook's consumption signal: Claude
Code and Codex put it into the model's next request of the same turn), in the write that claimed
it, so a failed write leaves the mail unread and in no delivery. Gemini CLI (AfterTool) is the
exception: a failed Gemini turn is dropped from its session, so its batch stays claimed until
AfterAgent acks it, or the next prompt releases it (``deferred``).

Also in turns the daemon started (``AGENTMAIL_DELIVERY`` set): the daemon's own batch is in a
delivery already, so only mail that arrived since is taken. Stdlib only, like the rest of the hook.
"""

from __future__ import annotations

import os

from agentmaild.hooks.io import env_float, output_limit
from agentmaild.render import inject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmaild.hooks.run import Hook

DEFAULT_DEBOUNCE_S = 30.0
POLICY_ENV = "AGENTMAILD_DELIVERY_MID_TURN_PRIORITY"
RANKS = {"urgent": 0, "high": 1, "normal": 2, "low": 3}  # = models.PRIORITY_RANK


def policy(hook: Hook) -> str:
    """The agent's setting, else the environment's (the daemon's config), else the default."""
    from agentmaild.store.midturn import DEFAULT_POLICY, POLICIES

    own = hook.store().settings(hook.agent).get("mid_turn_priority")
    if isinstance(own, str) and own in POLICIES:
        return own
    env = os.environ.get(POLICY_ENV, "")
    return env if env in POLICIES else DEFAULT_POLICY


def deliver(hook: Hook) -> int:
    """The mid-turn batch, if the policy lets any mail in now (see the module docstring)."""
    if not hook.has_unread():  # the common case: one read, nothing more loaded
        return 0
    from agentmaild.store.midturn import HIGH_RANK, POLICIES

    rank = POLICIES[policy(hook)]
    if rank < 0:
        return 0
    from agentmaild.hooks import state as hooks_state

    marker = hooks_state.marker_path(hook.db_path or hook.store().local, hook.agent, "mid-turn")
    debounce_s = env_float("AGENTMAILD_HOOKS_POST_TOOL_USE_DEBOUNCE_S", DEFAULT_DEBOUNCE_S)
    held = rank > HIGH_RANK and hooks_state.touched_within(marker, debounce_s)
    return hook.in_write(lambda: _batch(hook, HIGH_RANK if held else rank, marker))


def _batch(hook: Hook, rank: int, marker: str) -> None:
    """In the hook's write: take, claim, write, ack (``store.midturn``)."""
    from agentmaild.ids import new_id
    from agentmaild.store import midturn
    from agentmaild.store.ports import INJECT_RESERVE

    port = hook.store()
    limit = output_limit()
    gemini = hook.vendor == "gemini"
    if gemini:
        from agentmaild.hooks import deferred

        deferred.renew_mid_turn(hook, port.claims())
    taken = port.mid_turn_take(hook.agent, rank, limit - INJECT_RESERVE)
    if taken is None:
        return
    rows, unread, nudges, lead = taken
    delivery_id = new_id("dlv")
    # Claude Code and Codex: PostToolUse JSON (Gemini's AfterTool the same under its name); the
    # OpenCode plugin appends plain text to the tool's output (tool.execute.after)
    wrap = inject.vendor_wrap("gemini", "PostToolUse") if gemini else inject.post_tool_use_json
    wrap = inject.plain if hook.vendor == "opencode" else wrap
    out, ids = inject.fit_rows(rows, hook.agent, unread, nudges, wrap, limit, lead, delivery_id)
    tx = port.claims()
    began = midturn.mid_turn_claim(tx, hook.agent, delivery_id, ids)
    if gemini:  # acked at AfterAgent (``deferred``): a failed Gemini turn is dropped
        deferred.hold_mid_turn(hook, delivery_id, began)
    if any(RANKS.get(r["priority"], 3) > 1 for r in rows if r["id"] in ids):
        from agentmaild.hooks import state as hooks_state

        hooks_state.touch(marker)()  # normal or low goes: the debounce starts (a failure here
        # rolls the claim back before anything was written)
    hook.out.write(out.encode("utf-8"))
    hook.out.flush()
    if not gemini:
        midturn.mid_turn_ack(tx, hook.agent, delivery_id, began)
