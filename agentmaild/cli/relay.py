"""The ``relay`` command: forward mail to ``peer:NAME/agent`` to the peer domains, signed."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from agentmaild.cli.common import DbOpt, JsonOpt, command, db_target, open_store, out
from agentmaild.cli.trust import KeyFileOpt
from agentmaild.trust import keyfile


def relay(
    to: Annotated[str | None, typer.Option("--to", help="The peer's HTTP API (default: the "
                                           "URL of `peers add --url`).")] = None,
    peer: Annotated[str | None, typer.Option("--peer", help="Only mail for this peer.")] = None,
    once: Annotated[bool, typer.Option("--once", help="One pass, then exit.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between passes.")] = 1.0,
    key_file: KeyFileOpt = None, db: DbOpt = None, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Forward mail addressed to peer:NAME/agent, signed with this domain's key (at least once;
    the peer drops repeats by message id). Exits 1 when a --once pass left mail undelivered."""
    # Loaded when relaying, not at the CLI's start: it brings urllib.request and the receive side.
    from agentmaild.trust.relay import relay_pass

    key = keyfile.load(keyfile.key_path(db_target(db), key_file))
    with open_store(db) as store:
        try:
            while True:
                report = relay_pass(store, key, to=to, peer=peer)
                for mid, error in report.failed:
                    typer.echo(f"error: {mid}: {error}", err=True)
                if once:
                    break
                if report.relayed and not as_json:
                    typer.echo(f"relayed {len(report.relayed)}")
                time.sleep(interval if not report.relayed else 0)
        except KeyboardInterrupt:
            return  # Ctrl-C ends the loop; what was relayed is marked, the rest waits
    out({"ok": not report.failed, "relayed": report.relayed,
         "failed": [{"id": i, "error": e} for i, e in report.failed]}, as_json,
        lambda: typer.echo(f"relayed {len(report.relayed)}"))  # fmt: skip
    if report.failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("relay")(command(relay))
