"""The ``deliveries`` command: the delivery history (one row per finished attempt), newest first.

Read-only: it never creates a store. ``--since`` takes an ISO-8601 time or a relative ``10m``.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Annotated

import typer

from agentmaild.cli import costs
from agentmaild.cli.common import DbOpt, JsonOpt, one_line, open_store, out
from agentmaild.errors import NotFound
from agentmaild.ids import check_message_id, check_name, iso_now
from agentmaild.models import Attempt
from agentmaild.store.base import MailStore

_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_ERROR_COLUMN_CHARS = 120


def parse_since(value: str, now: float) -> float:
    """Unix seconds of ``10m``/``2h``/``3d`` ago, or of an ISO-8601 time (UTC without an offset).

    Raises ``ValueError`` naming what is accepted.
    """
    text = value.strip()
    relative = _RELATIVE.fullmatch(text)
    if relative is not None:
        return now - float(relative[1]) * _UNIT_S[relative[2]]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{value!r} is neither a duration (30s, 10m, 2h, 3d, 1w) nor an ISO-8601 time "
            "(2024-06-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _since_option(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_since(value, time.time())
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--since'") from None


def _line(a: Attempt) -> str:
    spent = f"{a.duration_s:.2f}s" if a.duration_s is not None else "-"
    error = one_line(a.error)[:_ERROR_COLUMN_CHARS] if a.error else ""
    return (
        f"{iso_now(a.at)}  {a.delivery_id}  {a.agent}  #{a.attempt}  {a.outcome:<11}  {spent:>8}  "
        f"{','.join(a.message_ids)}" + (f"  {error}" if error else "")
    )


def _check_known(store: MailStore, agent: str | None, message_id: str | None) -> None:
    """No history for a name or id the store never knew is a mistake, not an empty answer."""
    if agent is not None and store.get_agent(agent) is None:
        raise NotFound(f"no agent named {agent!r}")
    if message_id is not None and store.get_message(message_id) is None:
        raise NotFound(f"no message {message_id}")


def deliveries(
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="This agent's only.")] = None,
    message_id: Annotated[
        str | None, typer.Option("--message", "-m", help="Attempts that carried this message.")
    ] = None,
    since: Annotated[
        float | None,
        typer.Option(
            "--since",
            parser=_since_option,
            metavar="WHEN",
            help="Ended at or after: 10m, 2h, 3d ago, or an ISO-8601 time (UTC by default).",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=100_000, help="At most this many.")
    ] = 50,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delivery history, newest first: one row per finished attempt.

    Each row: time, delivery id, agent, attempt number, outcome (acked, failed, unavailable,
    dead, released, interrupted; mid-turn: handed to a running turn between tool calls),
    duration, message ids and the error (an interrupt's: who asked and why).
    """
    if agent is not None:
        check_name(agent)
    if message_id is not None:
        check_message_id(message_id)
    with open_store(db, readonly=True) as store:
        found = store.list_attempts(agent=agent, message_id=message_id, since=since, limit=limit)
        if not found:
            _check_known(store, agent, message_id)  # removed agents keep their history
        shown = {"attempts": costs.with_usage(store, found),
                 "cost": costs.figures(store, time.time())}  # fmt: skip
    out(
        {"ok": True, **shown},
        as_json,
        lambda: typer.echo("\n".join(_line(a) for a in found) or "no delivery attempts"),
    )


def register(app: typer.Typer) -> None:
    from agentmaild.cli.common import command

    app.command(name="deliveries")(command(deliveries))
