"""``agentmaild mcp``: the stdio MCP server for one agent (``agentmaild.mcpserver``, loaded only
when this command runs: the SDK never weighs on the other commands or the hooks)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentmaild.cli.common import STATE, DbOpt, TokenOpt, UrlOpt, command


@command
def mcp(
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="Who the tools act as (default: $AGENTMAIL_AGENT; with --url: the token's agent).",
        ),
    ] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    token: TokenOpt = None,
) -> None:
    """Serve the agent's team mail as MCP tools on stdin/stdout (for Claude Code, Codex, …)."""
    from agentmaild.mcpserver.start import serve

    serve(agent, db or STATE.db, url or STATE.url, token or STATE.token)


def register(app: typer.Typer) -> None:
    app.command()(mcp)
