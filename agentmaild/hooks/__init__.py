"""Claude Code hooks: the per-prompt ``agentmaild hook EVENT`` path and the settings installer.

Owns: ``run`` (the stdlib-only hook entry point, every prompt and tool call), ``events`` (the
handlers of the rarer events, loaded only for them; ``midturn``: PostToolUse's mid-turn mail by
policy), ``io`` (its argv/stdin/env/log helpers),
``guard`` (the mail-poll detector for PreToolUse), ``state`` (marker files and the hook log),
``install`` (merging our hooks into ``.claude/settings.local.json``), ``remote`` and ``serve``
(the hook over ``AGENTMAIL_URL``: the client half, and the daemon's that runs it on its store).
Its store work goes through the port the store hands out (``store.ports``: turn state, seen
batch headers, mail taken and acked), whichever backend it is; the marker files and the log sit
beside the store's local path (``StoreLocation.local``).
May import: ``errors``, ``ids``, ``inject``, ``render``, ``location``, ``store.location``,
``store.ports`` and ``control.client`` — lazily, and never typer, structlog, asyncio or
``config`` (the hook's cold start is benchmarked). Kept import-free so ``agentmaild.hooks.run``
loads only what it names.
"""
