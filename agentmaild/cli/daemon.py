"""The daemon's CLI commands: serve, status, ctl, retry — parse, call, print; no logic. The
bodies of ``status`` and ``ctl`` are ``cli.daemon_ops``', which run without typer."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import typer

from agentmaild.cli import daemon_ops
from agentmaild.cli.common import DbOpt, JsonOpt, command, db_location, open_store, out
from agentmaild.errors import DaemonNotRunning, NotFound, UsageError, ValidationError

ConfigOpt = Annotated[
    str | None, typer.Option("--config", help="Config file (default: $AGENTMAILD_CONFIG, XDG).")
]
AgentOpt = Annotated[
    str | None, typer.Option("--agent", help="Re-queue this agent's dead letters.")
]
DeliveryOpt = Annotated[str | None, typer.Option("--delivery", help="Re-queue one dead delivery.")]

DELIVERY_ID_RE = re.compile(r"dlv-[a-z0-9]{6,40}")


def serve(
    db: DbOpt = None,
    config: ConfigOpt = None,
    http: Annotated[
        str | None,
        typer.Option("--http", metavar="HOST:PORT", help="Serve the HTTP API (http.listen)."),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Deliver to this host's agents only ([daemon] host; default: the hostname).",
        ),
    ] = None,
) -> None:
    """Run the delivery daemon for the store (one per store) until SIGTERM/SIGINT."""
    import dataclasses

    from agentmaild.config import load_config
    from agentmaild.daemon.serve import serve as run_daemon
    from agentmaild.store.location import StoreLocation

    cfg = load_config(Path(config).expanduser() if config else None)
    if http is not None:
        cfg = dataclasses.replace(cfg, http=dataclasses.replace(cfg.http, listen=http))
    if host is not None:
        from agentmaild.ids import check_host

        daemon_cfg = dataclasses.replace(cfg.daemon, host=check_host(host))
        cfg = dataclasses.replace(cfg, daemon=daemon_cfg)
    use_config_db = not db and not os.environ.get("AGENTMAIL_DB") and cfg.store.db is not None
    location = StoreLocation.of(str(cfg.store.db)) if use_config_db else db_location(db)
    raise typer.Exit(run_daemon(location, cfg))


def status(
    db: DbOpt = None,
    as_json: JsonOpt = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every second.")] = False,
) -> None:
    """The daemon (pid, uptime, version, store) and one row per agent; works with no daemon."""
    daemon_ops.status(db, as_json, watch)


# -- ctl, retry -------------------------------------------------------------------------------
def ctl(
    cmd: Annotated[
        str,
        typer.Argument(
            metavar="COMMAND",
            help="ping status agents wake pause resume retry drain reload shutdown metrics",
        ),
    ],
    args: Annotated[list[str] | None, typer.Argument(metavar="[KEY=VALUE]...")] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send one control command to the running daemon (e.g. `ctl pause agent=builder-1`)."""
    daemon_ops.ctl(cmd, args, db, as_json)


def retry(
    agent: AgentOpt = None,
    delivery: DeliveryOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-queue dead letters (all, one agent's, or one delivery); each starts afresh."""
    if agent and delivery:
        raise UsageError("give --agent or --delivery, not both")
    if delivery is not None and not DELIVERY_ID_RE.fullmatch(delivery):
        raise ValidationError(
            f"invalid delivery id {delivery[:80]!r}: expected dlv-<letters and digits>"
        )
    location = db_location(db)
    args = {k: v for k, v in (("agent", agent), ("delivery", delivery)) if v is not None}
    try:
        # Through the daemon when it runs: it also drops the backoff of the agents' loops.
        ids, woken = daemon_ops.request(location, "retry", args)["requeued"], True
    except DaemonNotRunning:
        with open_store(location.target) as store:
            ids, woken = store.retry_dead(agent=agent, delivery_id=delivery), False
    if delivery and not ids:
        raise NotFound(f"no dead delivery {delivery!r}")
    data = {"ok": True, "requeued": ids, "daemon_woken": woken}

    def human() -> None:
        typer.echo(f"re-queued {len(ids)} dead-letter batch(es)" + "".join(f"\n{i}" for i in ids))
        if ids and not woken:
            typer.echo("daemon: not running; they are delivered when it starts")

    out(data, as_json, human)


def register(app: typer.Typer) -> None:
    """Add serve, status, ctl and retry to the main CLI."""
    for fn, name in ((serve, "serve"), (status, "status"), (ctl, "ctl"), (retry, "retry")):
        app.command(name=name)(command(fn))
