"""The hook over the HTTP API (``AGENTMAIL_URL``): the client half and the daemon's half.

``run_remote`` (in the hook process, stdlib only) posts the event and its stdin to
``/v1/hooks/{event}`` and prints what comes back; ``serve_hook`` (in the daemon, on its store
connection) runs the very handlers a local hook runs, writing into a buffer instead of stdout.
Difference from a local hook: the daemon commits the ack before the client prints, so a client
that dies between the two loses that output (the mail is read; ``agentmaild read`` shows it).
The daemon's own ``AGENTMAILD_HOOKS_*`` settings and marker files apply.
"""

from __future__ import annotations

import io
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmaild.hooks.run import Hook
    from agentmaild.store.ports import Port


def run_remote(hook: Hook) -> int:
    from agentmaild.http.client import call, target

    remote = target()
    assert remote is not None  # the caller saw AGENTMAIL_URL
    body = {"agent": hook.agent, "input": hook.raw.decode("utf-8", "replace"), "quiet": hook.quiet,
            "vendor": hook.vendor}  # fmt: skip
    answer = call(remote, "POST", f"/v1/hooks/{hook.event}", body)
    text = answer.get("stdout")
    if isinstance(text, str) and text:  # in the vendor's shape already
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
    code = answer.get("exit")
    return code if isinstance(code, int) else 0


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
    from agentmaild.hooks.run import Hook

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
