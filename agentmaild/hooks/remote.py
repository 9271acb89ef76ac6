"""The hook over the HTTP API (``AGENTMAIL_URL``): the client half, in the hook process.

``run_remote`` (in the hook process, stdlib only) posts the event and its stdin to
``/v1/hooks/{event}`` and prints what comes back; ``serve.serve_hook`` (in the daemon, on its
store connection) runs the very handlers a local hook runs, writing into a buffer instead of stdout.
Difference from a local hook: the daemon commits the ack before the client prints, so a client
that dies between the two loses that output (the mail is read; ``agentmaild read`` shows it).
The daemon's own ``AGENTMAILD_HOOKS_*`` settings and marker files apply.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agentmaild.hooks.run import Hook


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
