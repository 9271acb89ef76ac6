"""The daemon's CLI commands: serve, status, ctl, retry — parse, call, print; no logic."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agentmaild.cli.common import (
    DbOpt,
    JsonOpt,
    command,
    db_location,
    echo_text,
    one_line,
    open_store,
    out,
)
from agentmaild.cli.costs import costs_of
from agentmaild.cli.status_view import print_status
from agentmaild.errors import (
    DaemonNotRunning,
    NotFound,
    UsageError,
    ValidationError,
)
from agentmaild.mail.jsoninput import JsonInputError, check_text, json_or_text
from agentmaild.store.location import StoreLocation

ConfigOpt = Annotated[
    str | None, typer.Option("--config", help="Config file (default: $AGENTMAILD_CONFIG, XDG).")
]
AgentOpt = Annotated[
    str | None, typer.Option("--agent", help="Re-queue this agent's dead letters.")
]
DeliveryOpt = Annotated[str | None, typer.Option("--delivery", help="Re-queue one dead delivery.")]
_WATCH_INTERVAL_S = 1.0
_STATUS_TIMEOUT_S = 1.0  # then the store's own counts are shown: status must never hang
_CLEAR = "\x1b[H\x1b[2J"


DELIVERY_ID_RE = re.compile(r"dlv-[a-z0-9]{6,40}")


def _socket(location: StoreLocation) -> Path:
    from agentmaild.config import load_config
    from agentmaild.control.protocol import socket_path_for

    return socket_path_for(location, load_config().daemon.socket)


def _request(
    location: StoreLocation, cmd: str, args: dict[str, Any] | None = None, timeout: float = 5.0
) -> Any:
    from agentmaild.control.client import request

    return request(_socket(location), cmd, args, timeout)


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


# -- status -----------------------------------------------------------------------------------
def _status(location: StoreLocation) -> dict[str, Any]:
    from agentmaild.rules.team import team_status
    from agentmaild.store.files import modes_warning

    result = team_status(location, _socket(location), _STATUS_TIMEOUT_S)
    result["store"] = location.shown  # a server's store: its DSN without the password
    result["warnings"] = []
    if location.is_file:  # only a file here can be left readable by other users
        result["warnings"] = [w for w in (modes_warning(location.local_path),) if w]
    if location.shared_by_hosts:
        result["hosts"] = _hosts(location)
    result["operator_unread"] = _operator_unread(location)
    result["costs"] = costs_of(location.target, time.time())  # what the team costs (cli.costs)
    return result


def _hosts(location: StoreLocation) -> list[dict[str, Any]] | None:
    """Every host's daemon of a store shared by hosts (None when the store cannot be read)."""
    from agentmaild.store.kinds import host_daemons

    return host_daemons(location)


# -- operator mail: reports (NDRs, daemon notices) to mail sent without --from ------------------
def _operator_unread(location: StoreLocation) -> int | None:
    """Unread mail for ``operator``, which no agent reads; None when the store cannot be read."""
    from agentmaild.errors import StoreError
    from agentmaild.mail.mailer import OPERATOR

    try:
        with open_store(location.target, readonly=True) as store:
            c = store.counts().get(OPERATOR)
    except StoreError:
        return None
    return c.unread if c else 0


def status(
    db: DbOpt = None,
    as_json: JsonOpt = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every second.")] = False,
) -> None:
    """The daemon (pid, uptime, version, store) and one row per agent; works with no daemon."""
    location = db_location(db)
    if not watch:
        data = _status(location)
        out({"ok": True, **data}, as_json, lambda: print_status(data))
        return
    try:
        while True:
            data = _status(location)
            if as_json:
                typer.echo(json.dumps({"ok": True, **data}))
            else:
                typer.echo(_CLEAR, nl=False)
                print_status(data)
            time.sleep(_WATCH_INTERVAL_S)  # a terminal refresh, not a daemon loop
    except KeyboardInterrupt:
        return


# -- ctl, retry -------------------------------------------------------------------------------
def _parse_args(pairs: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValidationError(f"argument {pair!r}: expected KEY=VALUE")
        try:
            check_text(key)
            value = json_or_text(raw)
        except JsonInputError as exc:
            raise ValidationError(f"argument {one_line(key)}: {exc.message}") from None
        if key == "agents" and isinstance(value, str):
            value = [v for v in value.split(",") if v]
        args[key] = value
    return args


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
    from agentmaild.control.protocol import seconds_arg

    parsed = _parse_args(args or [])
    # Checked here, before anything is sent: a bad value is one error line, never a traceback.
    waits = seconds_arg(parsed, "timeout_s", 0.0) if "timeout_s" in parsed else 0.0
    timeout = 5.0 + (waits if cmd == "drain" else 0.0)
    result = _request(db_location(db), cmd, parsed, timeout)
    if cmd == "metrics":
        from agentmaild.control.replies import check_text

        check_text(result, cmd)

    def human() -> None:
        if cmd == "metrics":
            typer.echo(result["text"], nl=False)
        else:
            from agentmaild.cli.ctl_view import text_lines

            for line in text_lines(result):
                echo_text(line)

    out({"ok": True, "result": result}, as_json, human)


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
        ids, woken = _request(location, "retry", args)["requeued"], True
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
