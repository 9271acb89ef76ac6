"""The bodies of ``status`` and ``ctl``, without typer: the daemon's state and the store's own
counts, and one control command to the running daemon. Each takes the keyword arguments its
typer declaration in ``cli.daemon`` passes; ``plain.call`` runs one as typer's ``command`` does.
``cli.daemon`` also asks the daemon through ``request`` (``retry``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agentmaild.cli.plain import db_location, echo, echo_text, open_store, out
from agentmaild.cli.status_view import print_status
from agentmaild.mail.jsoninput import key_values
from agentmaild.store.location import StoreLocation

_WATCH_INTERVAL_S = 1.0
_STATUS_TIMEOUT_S = 1.0  # then the store's own counts are shown: status must never hang
_CLEAR = "\x1b[H\x1b[2J"


def socket_of(location: StoreLocation) -> Path:
    """The control socket of the store's daemon (``[daemon] socket`` of the config)."""
    from agentmaild.config import load_config
    from agentmaild.control.protocol import socket_path_for

    return socket_path_for(location, load_config().daemon.socket)


def request(
    location: StoreLocation, cmd: str, args: dict[str, Any] | None = None, timeout: float = 5.0
) -> Any:
    """Ask the store's daemon ``cmd`` over its control socket; its answer."""
    from agentmaild.control.client import request as ask

    return ask(socket_of(location), cmd, args, timeout)


# -- status -----------------------------------------------------------------------------------
def _status(location: StoreLocation) -> dict[str, Any]:
    from agentmaild.rules.costs import STATUS_EXTRAS
    from agentmaild.rules.team import team_status
    from agentmaild.store.files import modes_warning

    result = team_status(location, socket_of(location), _STATUS_TIMEOUT_S, {"costs": True})
    extras = {k: result.pop(k) for k in STATUS_EXTRAS if k in result}  # the daemon's, in place
    result["store"] = location.shown  # a server's store: its DSN without the password
    result["warnings"] = []
    if location.is_file:  # only a file here can be left readable by other users
        result["warnings"] = [w for w in (modes_warning(location.local_path),) if w]
    if location.shared_by_hosts:
        result["hosts"] = _hosts(location)
    if len(extras) < len(STATUS_EXTRAS):  # no daemon (or one from before it could tell them)
        extras = _from_the_store(location, time.time())
    result.update(extras)  # last, where --json has always shown them
    return result


def _hosts(location: StoreLocation) -> list[dict[str, Any]] | None:
    """Every host's daemon of a store shared by hosts (None when the store cannot be read)."""
    from agentmaild.store.kinds import host_daemons

    return host_daemons(location)


def _from_the_store(location: StoreLocation, now: float) -> dict[str, Any]:
    """``status_extras`` from one look at the store; None for each when it cannot be read."""
    from agentmaild.errors import StoreError
    from agentmaild.rules.costs import STATUS_EXTRAS, status_extras

    try:
        with open_store(location.target, readonly=True) as store:
            return status_extras(store, now)
    except StoreError:
        return dict.fromkeys(STATUS_EXTRAS)


def status(db: str | None = None, as_json: bool = False, watch: bool = False) -> None:
    """``agentmaild status``: the daemon and one row per agent; works with no daemon."""
    location = db_location(db)
    if not watch:
        data = _status(location)
        out({"ok": True, **data}, as_json, lambda: print_status(data))
        return
    try:
        while True:
            data = _status(location)
            if as_json:
                echo(json.dumps({"ok": True, **data}))
            else:
                echo(_CLEAR, nl=False)
                print_status(data)
            time.sleep(_WATCH_INTERVAL_S)  # a terminal refresh, not a daemon loop
    except KeyboardInterrupt:
        return


# -- ctl --------------------------------------------------------------------------------------
def _parse_args(pairs: list[str]) -> dict[str, Any]:
    """``ctl``'s ``KEY=VALUE`` arguments; ``agents`` as a comma list is a list."""
    args = key_values(pairs, "argument")
    if isinstance(args.get("agents"), str):
        args["agents"] = [v for v in args["agents"].split(",") if v]
    return args


def ctl(
    cmd: str, args: list[str] | None = None, db: str | None = None, as_json: bool = False
) -> None:
    """``agentmaild ctl COMMAND [KEY=VALUE]...``: one control command to the running daemon."""
    from agentmaild.control.protocol import seconds_arg

    parsed = _parse_args(args or [])
    # Checked here, before anything is sent: a bad value is one error line, never a traceback.
    waits = seconds_arg(parsed, "timeout_s", 0.0) if "timeout_s" in parsed else 0.0
    timeout = 5.0 + (waits if cmd == "drain" else 0.0)
    result = request(db_location(db), cmd, parsed, timeout)
    if cmd == "metrics":
        from agentmaild.control.replies import check_text

        check_text(result, cmd)

    def human() -> None:
        if cmd == "metrics":
            echo(result["text"], nl=False)
        else:
            from agentmaild.cli.ctl_view import text_lines

            for line in text_lines(result):
                echo_text(line)

    out({"ok": True, "result": result}, as_json, human)
