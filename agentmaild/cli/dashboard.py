"""``agentmaild dashboard``: the daemon's dashboard URL, printed and (at a terminal) opened."""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from agentmaild.cli.common import DbOpt, JsonOpt, command, db_location, open_store, out
from agentmaild.errors import DaemonNotAnswering, DaemonNotRunning, UsageError
from agentmaild.store.location import StoreLocation
from agentmaild.trust.tokens import DASHBOARD_SCOPES, OPERATOR_AGENT, mint, parse_duration


def _daemon_http(location: StoreLocation) -> tuple[str, bool]:
    """The daemon's bound ``HOST:PORT`` and whether it asks for tokens."""
    from agentmaild.config import load_config
    from agentmaild.control.client import request
    from agentmaild.control.protocol import socket_path_for

    config = load_config()
    try:
        info = request(socket_path_for(location, config.daemon.socket), "ping", None, 2.0)
    except (DaemonNotRunning, DaemonNotAnswering) as exc:
        raise DaemonNotRunning(
            f"{exc.message}; start it with `agentmaild serve --http 127.0.0.1:8025`"
        ) from exc
    address = info.get("http")
    if not address:
        raise UsageError(
            "the daemon does not serve HTTP: restart it with `agentmaild serve --http "
            "127.0.0.1:8025` (or set [http] listen)"
        )
    return str(address), config.http.require_tokens


def _browsable(address: str) -> str:
    host, _, port = address.rpartition(":")
    if host in ("0.0.0.0", "::", "[::]"):  # bound to every address: open it on loopback
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def dashboard(
    expires: Annotated[
        str, typer.Option("--expires", help="Lifetime of the dashboard's session token.")
    ] = "12h",
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Only print the URL; do not start a browser.")
    ] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the URL of the running daemon's web dashboard (with a fresh dashboard token when the
    daemon requires tokens) and open it in a browser when run at a terminal.

    The token has only the dashboard's scopes (dashboard: see it; control: its pause, resume
    and retry buttons): a URL that leaks from a browser's history or a terminal's scrollback
    cannot read, send or ack mail through /v1."""
    address, require_tokens = _daemon_http(db_location(db))
    url = f"http://{_browsable(address)}/"
    token_id = None
    if require_tokens:
        secret, record = mint(OPERATOR_AGENT, DASHBOARD_SCOPES, now=time.time(),
                              expires_in_s=parse_duration(expires))  # fmt: skip
        with open_store(db) as store:
            store.add_token(record)
        url, token_id = f"{url}?token={secret}", record.id
    opened = False
    if not no_open and not as_json and sys.stdout.isatty():
        import webbrowser

        opened = webbrowser.open(url)
    out({"ok": True, "url": url, "token_id": token_id, "opened": opened}, as_json,
        lambda: typer.echo(url))  # fmt: skip


def register(app: typer.Typer) -> None:
    app.command("dashboard")(command(dashboard))
