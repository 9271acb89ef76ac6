"""``hooks install|uninstall --vendor codex|gemini|opencode``: the CLI half of ``hooks.vendors``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import typer

from agentmaild.cli.common import out
from agentmaild.errors import ValidationError
from agentmaild.hooks import vendors


def _check(vendor: str) -> None:
    if vendor not in vendors.VENDORS:
        raise ValidationError(f"unknown vendor {vendor!r}; one of: {', '.join(vendors.VENDORS)}")


def install_vendor(
    vendor: str,
    directory: Path | None,
    agent: str,
    store: str | None,
    exe: str,
    codex: str | None,
    as_json: bool,
) -> None:
    _check(vendor)
    where = directory.absolute() if directory is not None else None
    db = Path(store).expanduser().absolute() if store else None
    result = vendors.install(vendor, where, agent, db, exe)
    result["mcp"] = register_mcp(vendor, where, agent, db, exe)
    result["changed"] = result["changed"] or result["mcp"]["changed"]
    if vendor == "codex":
        result.update(_trust(codex, Path(result["path"]), where or Path.cwd(), exe))
    verb = "installed" if result["changed"] else "already installed"

    def human() -> None:
        typer.echo(f"{verb}: agentmaild {vendor} hooks for {agent} in {result['path']}")
        typer.echo(f"MCP server 'agentmail' for {agent} in {result['mcp']['path']}")
        if result.get("trust_error"):
            typer.echo(f"warning: {result['trust_error']}", err=True)

    out(result, as_json, human)


def _trust(codex: str | None, hooks_file: Path, cwd: Path, exe: str) -> dict[str, Any]:
    from agentmaild.hooks import codex_trust

    binary = codex or shutil.which("codex")
    advice = (
        "Codex runs them only once trusted: rerun with --codex PATH, trust them in codex's "
        "/hooks, or start codex with --dangerously-bypass-hook-trust"
    )
    if not binary:
        return {"trusted": False, "trust_error": f"no codex executable found. {advice}"}
    try:
        count = codex_trust.trust(binary, hooks_file, cwd, exe)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError) as exc:
        return {"trusted": False, "trust_error": f"saving the trust failed ({exc}). {advice}"}
    return {"trusted": True, "newly_trusted": count}


def register_mcp(
    vendor: str, where: Path | None, agent: str, db: Path | None, exe: str
) -> dict[str, Any]:
    """``agentmaild mcp`` registered in the vendor's MCP config (``hooks.mcp_config``)."""
    from agentmaild.hooks import mcp_config

    changed = mcp_config.install(vendor, where, agent, db, exe)
    return {"path": str(mcp_config.mcp_path(vendor, where)), "changed": changed}


def unregister_mcp(vendor: str, where: Path | None) -> dict[str, Any]:
    from agentmaild.hooks import mcp_config

    changed = mcp_config.uninstall(vendor, where)
    return {"path": str(mcp_config.mcp_path(vendor, where)), "removed": int(changed)}


def uninstall_vendor(vendor: str, directory: Path | None, exe: str) -> dict[str, Any]:
    _check(vendor)
    where = directory.absolute() if directory else None
    result = vendors.uninstall(vendor, where, exe)
    return {**result, "mcp": unregister_mcp(vendor, where)}
