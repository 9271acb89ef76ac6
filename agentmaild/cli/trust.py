"""The ``keys`` and ``peers`` commands of the trust domains: parse, call the store, print."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from agentmaild.cli.common import DbOpt, JsonOpt, command, db_target, open_store, out
from agentmaild.errors import NotFound
from agentmaild.ids import check_name
from agentmaild.trust import envelope, keyfile
from agentmaild.trust.peers import Peer

KeyFileOpt = Annotated[
    str | None,
    typer.Option("--key-file", help="This domain's key (default: $AGENTMAIL_KEY_FILE, else "
                 "domain.key next to the store file)."),
]  # fmt: skip


def keys_create(
    domain: Annotated[str, typer.Option("--domain", help="This domain's name, as peers know it.")],
    key_file: KeyFileOpt = None, db: DbOpt = None, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Create this domain's Ed25519 key pair (private key file 0600); print the public key."""
    check_name(domain, "domain")
    key = keyfile.create(keyfile.key_path(db_target(db), key_file), domain)
    out({"ok": True, **key.to_dict()}, as_json,
        lambda: typer.echo(f"{key.public}\nkey id {key.key_id}  domain {key.domain}"))  # fmt: skip


def keys_show(key_file: KeyFileOpt = None, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Print this domain's public key and key id (never the private key)."""
    key = keyfile.load(keyfile.key_path(db_target(db), key_file))
    out({"ok": True, **key.to_dict()}, as_json,
        lambda: typer.echo(f"{key.public}\nkey id {key.key_id}  domain {key.domain}"))  # fmt: skip


def peers_add(
    name: Annotated[str, typer.Argument(help="The peer domain's name (its --domain).")],
    public_key: Annotated[str, typer.Option("--public-key", help="ed25519:<base64>.")],
    url: Annotated[str | None, typer.Option("--url", help="Its HTTP API, for `relay`.")] = None,
    db: DbOpt = None, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Trust mail signed by NAME's key: pin the key."""
    check_name(name, "peer")
    envelope.parse_public(public_key)
    peer = Peer(name=name, public_key=public_key, key_id=envelope.key_id(public_key), url=url,
                created_at=time.time())  # fmt: skip
    with open_store(db) as store:
        store.add_peer(peer)
    out({"ok": True, **peer.to_dict()}, as_json,
        lambda: typer.echo(f"peer {name} pinned (key id {peer.key_id})"))  # fmt: skip


def peers_list(db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """List the peer domains and their pinned key ids."""
    with open_store(db, readonly=True) as store:
        peers = store.list_peers()

    def human() -> None:
        if not peers:
            typer.echo("no peers")
        for p in peers:
            typer.echo(f"{p.name:<20} key {p.key_id}  {p.url or '-'}")

    out({"ok": True, "peers": [p.to_dict() for p in peers]}, as_json, human)


def peers_remove(
    name: Annotated[str, typer.Argument(help="The peer to forget.")],
    db: DbOpt = None, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Stop trusting a peer: its envelopes are refused from now on."""
    with open_store(db) as store:
        done = store.remove_peer(name)
    if not done:
        raise NotFound(f"no peer {name[:80]!r} (see `agentmaild peers list`)")
    out({"ok": True, "removed": name}, as_json, lambda: typer.echo(f"removed peer {name}"))


def register(app: typer.Typer) -> None:
    """Add the ``keys`` and ``peers`` groups to the main CLI."""
    keys_app = typer.Typer(help="This trust domain's signing key.", no_args_is_help=True)
    peers_app = typer.Typer(help="Trusted peer domains (pinned keys).", no_args_is_help=True)
    app.add_typer(keys_app, name="keys")
    app.add_typer(peers_app, name="peers")
    keys_app.command("create")(command(keys_create))
    keys_app.command("show")(command(keys_show))
    peers_app.command("add")(command(peers_add))
    peers_app.command("list")(command(peers_list))
    peers_app.command("remove")(command(peers_remove))
