"""The body of ``agentmaild agents list``, without typer; its typer declaration is in
``cli.agents`` (same parameters), and ``plain.call`` runs it as typer's ``command`` does."""

from __future__ import annotations

from agentmaild.cli.plain import echo, open_store, out


def list_agents(db: str | None = None, as_json: bool = False) -> None:
    """``agentmaild agents list``: the registered agents, one line each."""
    from agentmaild.cli.agents_fields import AGENT_HEADER, agent_line

    with open_store(db, readonly=True) as store:
        found = store.list_agents()
    lines = [AGENT_HEADER, *(agent_line(a) for a in found)] if found else ["no agents registered"]
    out({"ok": True, "agents": [a.to_dict() for a in found]}, as_json,
        lambda: echo("\n".join(lines)))  # fmt: skip
