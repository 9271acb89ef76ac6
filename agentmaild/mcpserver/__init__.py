"""``agentmaild mcp``: a stdio MCP server (the ``mcp`` SDK) that gives one agent its team mail as
tools. Loaded only by that command and by the daemon's MCP socket; never by the hooks,
``check --inject`` or ``hot/``.

Owns: ``schema`` (each tool's name, one-line description and input schema, and the check of a
call's arguments), ``doors`` (the store or the HTTP API, through the CLI's front doors: the
``Mailer``, the store's reads, ``hot.check``, ``rules.ask``, ``rules.team``, ``http.client``),
``calls`` (one call's answer), ``present`` (structured rows and framed bodies), ``serve`` (the
SDK's server, the resource ``mail://inbox`` and its wake-ups), ``start`` (identity and door),
``hosted`` (the daemon's MCP socket: the spawned turns' servers, reached through
``hot.mcp_relay``).
May import: ``mail``, ``store``, ``rules``, ``hot``, ``http.client``, ``render``, ``config``;
never ``cli``. Absolute imports only: ``mcp`` is the SDK.
"""
