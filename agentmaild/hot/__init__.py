"""The cold entry points: what runs on every hook call and quick command, before typer loads.

Owns: ``entry`` (the console script: routes the argument shapes it fully understands here, the
rest to the typer CLI), ``check`` (``check --inject``: take, render and ack in one write),
``send`` (the quick ``send``), ``access`` (how a command reaches the store and the daemon without
typer, shared with ``cli``), ``mcp_relay`` (a spawned turn's MCP server: a relay to the daemon's
MCP socket, or ``agentmaild mcp`` when none listens). Stdlib only on the SQLite path: no typer,
structlog, asyncio or dataclasses; the cold start is benchmarked (``bench/bench_cold.py``,
``bench/bench_hook.py``).
"""
