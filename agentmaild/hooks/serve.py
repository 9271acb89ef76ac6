"""The daemon's half of the hook over HTTP: ``serve_hook`` runs a posted event on the store.

It runs the very handlers a local hook runs, on the daemon's store connection, writing into a
buffer instead of stdout; the client half is ``remote.run_remote``. Apart from ``remote`` because
it builds a ``run.Hook`` while ``run`` reaches ``remote`` for the client half.
"""

from __future__ import annotations

import io

from agentmaild.hooks.run import Hook

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmaild.store.ports import Port


def serve_hook(
    event: str,
    agent: str,
    raw: bytes,
    quiet: bool,
    port: Port,
    vendor: str = "claude",
) -> tuple[int, str, bool]:
    """(exit code, output, whether the daemon should wake the agent's loop), the event run on
    ``port`` (the store's, lent by ``store.ports.port_of``).

    ``vendor``: the output's shape and the ack rule (Gemini's waits for AfterAgent)."""
    hook = Hook(event, [])
    hook.agent, hook.raw, hook.quiet, hook.vendor = agent, raw, quiet, vendor
    hook.port, hook.db_path = port, port.local
    buffer = io.BytesIO()
    hook.out = buffer
    poked = False

    def poke() -> None:
        nonlocal poked
        poked = True

    hook.poke = poke
    if hook.name is None or hook.name == "PreToolUse":
        return 0, "", False  # PreToolUse needs no store: the hook answers it itself
    if hook.name != "PostToolUse" or b'"agent_id"' in raw:
        hook.data = hook._parse()
    if not hook._wants_store():
        return 0, "", False
    code = hook.dispatch()
    return code, buffer.getvalue().decode("utf-8"), poked
