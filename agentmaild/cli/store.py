"""The ``store`` commands: ``store check`` and ``store copy`` — parse, call, print; no logic."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from agentmaild.cli.common import STATE, DbOpt, JsonOpt, command, db_location, one_line
from agentmaild.errors import UsageError
from agentmaild.store.check import CheckReport
from agentmaild.store.kinds import check_integrity, recovery_hint

FullOpt = Annotated[
    bool,
    typer.Option("--full", help="PRAGMA integrity_check (slower: also checks every index)."),
]


def store_check(full: FullOpt = False, db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Check the store: a file's SQLite quick_check (integrity_check with --full), a PostgreSQL
    store's schema (amcheck's index check with --full, when installed), then agentmaild's
    cross-table checks. Exit 0 when sound, 1 with the problems listed. Read-only."""
    report = check_integrity(db_location(db), full=full)
    if as_json or STATE.json:
        typer.echo(json.dumps(_json(report), ensure_ascii=False))
    else:
        _print(report)
    if not report.ok:
        raise typer.Exit(1)


SourceArg = Annotated[str, typer.Argument(help="The store to copy: a file or a postgresql:// DSN.")]
DestArg = Annotated[
    str, typer.Argument(help="An empty store to copy into (created when missing): file or DSN.")
]


def store_copy(src: SourceArg, dst: DestArg, as_json: JsonOpt = False) -> None:
    """Copy every row of SRC into DST (SQLite ↔ PostgreSQL), in one transaction, then verify
    each table by row count and checksum. Exit 1 when a table differs. Stop the daemons first."""
    from agentmaild.cli.common import store_at
    from agentmaild.store.copy import copy_store
    from agentmaild.store.copy_tables import TABLES

    if src == dst:
        raise UsageError("store copy: SRC and DST are the same store")
    source = store_at(src, readonly=True)
    try:
        destination = store_at(dst)
        try:
            report = copy_store(source, destination)
        finally:
            destination.close()
    finally:
        source.close()
    data = report.to_json()
    if not report.ok:
        differ = ", ".join(report.mismatched())
        message = f"tables differ after the copy: {differ}"
        data["error"] = {"code": "copy_mismatch", "message": message}
    if as_json or STATE.json:
        typer.echo(json.dumps(data, ensure_ascii=False))
    else:
        for table in TABLES:
            mark = "ok" if table not in report.mismatched() else "DIFFERS"
            figures = report.source[table]
            typer.echo(f"{table:<16} {figures.rows:>8} rows  {figures.checksum[:16]}  {mark}")
        if report.ok:
            typer.echo("copied and verified: every table's rows and checksum match")
        else:
            typer.echo(f"error: {data['error']['message']}", err=True)
    if not report.ok:
        raise typer.Exit(1)


def _json(report: CheckReport) -> dict[str, object]:
    data = report.to_json()
    if not report.ok:
        message = f"{len(report.problems)} problem(s) found; to recover: {recovery_hint(report)}"
        data["error"] = {"code": "store_damaged", "message": message}
    return data


_NO_AMCHECK = "--full: the amcheck extension is not installed"


def _print(report: CheckReport) -> None:
    kind = report.kind()
    if kind == "pg_amcheck" and any(w.startswith(_NO_AMCHECK) for w in report.warnings):
        kind = "pg_schema"  # amcheck did not run: say what did (the warning says why)
    typer.echo(f"store: {report.path}")
    typer.echo(f"{kind}: {'ok' if report.ok else f'{len(report.problems)} problem(s)'}")
    for problem in report.problems:
        typer.echo(f"  problem: {one_line(problem)}")
    for warning in report.warnings:
        typer.echo(f"  warning: {one_line(warning)}")
    if not report.ok:
        hint = recovery_hint(report)
        typer.echo(f"error: store {report.path} is damaged; to recover: {hint}", err=True)


def register(app: typer.Typer) -> None:
    """Add the ``store`` group (``store check``) to the main CLI."""
    store_app = typer.Typer(help="Examine or copy the store.", no_args_is_help=True)
    app.add_typer(store_app, name="store")
    store_app.command("check")(command(store_check))
    store_app.command("copy")(command(store_copy))
