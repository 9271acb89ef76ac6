"""The ``agentmaild service install|uninstall`` commands: write (or print) the systemd or launchd
file that runs ``agentmaild serve`` for this store, and remove it again.

A store file goes on the service's command line (``--db``); a PostgreSQL DSN goes into its
environment (``AGENTMAIL_DB``) from a 0600 file the unit names, since a command line is visible to
every user and a unit to anyone who can read it: nothing printed here holds the password."""

from __future__ import annotations

import sys
from typing import Annotated, Literal

import typer

from agentmaild.cli.common import DbOpt, JsonOpt, command, db_location, out
from agentmaild.errors import UsageError


def _kind(systemd: bool, launchd: bool) -> Literal["systemd", "launchd"]:
    """The flag given, else this platform's service manager."""
    if systemd and launchd:
        raise UsageError("choose one of --systemd and --launchd")
    if launchd or (not systemd and sys.platform == "darwin"):
        return "launchd"
    return "systemd"


def service_install(
    systemd: Annotated[
        bool, typer.Option("--systemd", help="A systemd user unit (Linux default).")
    ] = False,
    launchd: Annotated[
        bool, typer.Option("--launchd", help="A launchd agent (macOS default).")
    ] = False,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the file; write nothing.")
    ] = False,
    config: Annotated[
        str | None, typer.Option("--config", help="Config file the service uses.")
    ] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Install (or print) the service file that runs `agentmaild serve` for this store."""
    from pathlib import Path

    from agentmaild.config import load_config
    from agentmaild.daemon.service import install_service

    kind = _kind(systemd, launchd)
    cfg_path = Path(config).expanduser() if config else None
    cfg = load_config(cfg_path)
    # Checked, not connected to: the service may be installed before the database is up.
    location = db_location(db).checked()
    file = location.local_path if location.is_file else None
    result = install_service(
        kind,
        print_only,
        db=file,
        dsn=None if file else location.target,  # a secret: the service's environment, not argv
        config=cfg_path,
        workdir=Path.cwd(),
        shutdown_grace_s=cfg.daemon.shutdown_grace_s,
    )
    data = {
        "ok": True,
        "kind": kind,
        "path": str(result.path) if result.path else None,
        "next_steps": list(result.next_steps),
        "text": result.text,
        "env_file": str(result.env_file) if result.env_file else None,
    }

    def human() -> None:
        if result.path is None:
            typer.echo(result.text, nl=False)
            return
        if result.env_file is not None:
            typer.echo(f"wrote {result.env_file} (mode 0600: the store's DSN)")
        typer.echo(f"wrote {result.path}\nnext:\n  " + "\n  ".join(result.next_steps))

    out(data, as_json, human)


def service_uninstall(
    systemd: Annotated[
        bool, typer.Option("--systemd", help="The systemd user unit (Linux default).")
    ] = False,
    launchd: Annotated[
        bool, typer.Option("--launchd", help="The launchd agent (macOS default).")
    ] = False,
    print_only: Annotated[
        bool, typer.Option("--print", help="Show what would be removed; remove nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Remove the service file `service install` wrote; print how to stop the running service."""
    from agentmaild.daemon.service import uninstall_service

    kind = _kind(systemd, launchd)
    result = uninstall_service(kind, print_only)
    data = {
        "ok": True,
        "kind": kind,
        "paths": [str(p) for p in result.paths],
        "removed": result.removed,
        "next_steps": list(result.next_steps),
    }

    def human() -> None:
        if not result.paths:
            typer.echo(f"no agentmaild {kind} service installed")
            return
        verb = "removed" if result.removed else "would remove"
        typer.echo("\n".join(f"{verb} {p}" for p in result.paths))
        typer.echo("next:\n  " + "\n  ".join(result.next_steps))

    out(data, as_json, human)


def register(app: typer.Typer) -> None:
    """Add the ``service`` group (``install``, ``uninstall``) to the main CLI."""
    service_app = typer.Typer(help="Run agentmaild as a user service.", no_args_is_help=True)
    app.add_typer(service_app, name="service")
    service_app.command("install")(command(service_install))
    service_app.command("uninstall")(command(service_uninstall))
