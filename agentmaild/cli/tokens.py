"""The ``tokens`` commands of the HTTP API: create, list, revoke — parse, call the store, print."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from agentmaild.cli.common import DbOpt, JsonOpt, command, open_store, out
from agentmaild.errors import NotFound
from agentmaild.ids import check_name
from agentmaild.trust.tokens import OPERATOR_AGENT, mint, parse_duration, parse_scopes


def create(
    agent: Annotated[
        str, typer.Argument(help=f"The agent the token acts as ({OPERATOR_AGENT!r}: every agent).")
    ],
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="read, send or ack (the API); dashboard or control (the "
                     "dashboard, operator only); repeat for more (default: read, send, ack)."),
    ] = None,
    expires: Annotated[
        str | None, typer.Option("--expires", help="Lifetime: 30m, 12h, 7d, 2w (default: never).")
    ] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a bearer token for the HTTP API. It is printed once; only its hash is stored."""
    check_name(agent, "agent")
    scopes = parse_scopes(scope, agent)
    lifetime = parse_duration(expires) if expires is not None else None
    secret, record = mint(agent, scopes, now=time.time(), expires_in_s=lifetime)
    with open_store(db) as store:
        store.add_token(record)
    out(
        {"ok": True, "token": secret, **record.to_dict()},
        as_json,
        lambda: typer.echo(secret),
    )


def list_cmd(db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """List tokens (never the tokens themselves: their ids, agents, scopes and states)."""
    with open_store(db, readonly=True) as store:
        tokens = store.list_tokens()
    now = time.time()

    def human() -> None:
        if not tokens:
            typer.echo("no tokens")
        for t in tokens:
            until = t.expires_at
            shown = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(until)) if until else "-"
            state = t.usable(now) or "active"
            typer.echo(
                f"{t.id}  {t.agent:<20} {','.join(t.scopes):<17} {state:<8} expires {shown}"
            )

    out({"ok": True, "tokens": [t.to_dict(now) for t in tokens]}, as_json, human)


def revoke(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="The token's id (tokens list).")],
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a token: the API refuses it from the next request on."""
    with open_store(db) as store:
        done = store.revoke_token(token_id, now=time.time())
    if not done:
        raise NotFound(
            f"no token in force with id {token_id[:80]!r} (see `agentmaild tokens list`)"
        )
    out({"ok": True, "revoked": token_id}, as_json, lambda: typer.echo(f"revoked {token_id}"))


def register(app: typer.Typer) -> None:
    """Add the ``tokens`` group to the main CLI."""
    tokens_app = typer.Typer(help="Bearer tokens for the HTTP API.", no_args_is_help=True)
    app.add_typer(tokens_app, name="tokens")
    tokens_app.command("create")(command(create))
    tokens_app.command("list")(command(list_cmd))
    tokens_app.command("revoke")(command(revoke))
