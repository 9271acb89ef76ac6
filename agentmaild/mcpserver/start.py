"""Who the server acts as, fixed before it serves: ``--agent`` (else ``$AGENTMAIL_AGENT``) on the
store; with ``AGENTMAIL_URL`` the token's agent (an operator token acts as ``--agent``)."""

from __future__ import annotations

import os

from agentmaild.errors import UsageError
from agentmaild.ids import check_name
from agentmaild.mcpserver.doors import ApiDoor, Door, StoreDoor

OPERATOR = "operator"


def _api_agent(api: tuple[str, str | None], wanted: str | None) -> str:
    """The token's agent (the API's inbox answers for it when no agent is named). A daemon down
    at start is no reason to fail when ``--agent`` names the agent: every call is the token's
    to allow, and each says so while the daemon is away."""
    from agentmaild.errors import DaemonNotRunning
    from agentmaild.http.client import call

    try:
        own = str(call(api, "GET", "/v1/inbox", None, {"unread": "1"})["agent"])
    except DaemonNotRunning:
        if wanted is None:
            raise
        return wanted
    if wanted is None or wanted == own:
        return own
    if own != OPERATOR:
        raise UsageError(f"mcp: this token acts as {own!r}, not {wanted!r}")
    return wanted


def open_door(agent: str | None, db: str | None, url: str | None, token: str | None) -> Door:
    """The door the server's tools go through, as the agent it acts as."""
    from agentmaild.http.client import target

    wanted = agent or os.environ.get("AGENTMAIL_AGENT") or None
    if wanted is not None:
        wanted = check_name(wanted, "agent (--agent)")
    api = target(url, token)
    if api is not None:
        return ApiDoor(api, _api_agent(api, wanted))
    if wanted is None:
        raise UsageError("mcp: --agent is required (or set AGENTMAIL_AGENT)")
    from agentmaild.store.location import resolve_location

    return StoreDoor(resolve_location(db), wanted)


def serve(agent: str | None, db: str | None, url: str | None, token: str | None) -> None:
    """Serve MCP on stdin/stdout until the client closes them."""
    import anyio

    from agentmaild.mcpserver.serve import MailServer

    door = open_door(agent, db, url, token)
    try:
        anyio.run(MailServer(door, isinstance(door, ApiDoor)).run)
    finally:
        door.close()
