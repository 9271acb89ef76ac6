"""``agentmaild demo``: a keyless try-out. A throw-away team of three scripted agents (planner,
coder, reviewer: plain processes, no model) in a temporary directory with its own store and
daemon; the operator hands the planner a task every few seconds and the mail flows planner →
coder → reviewer → planner through the daemon. Prints the dashboard's URL and each message and
delivery as it happens; Ctrl-C (or SIGTERM, or ``--for`` seconds) stops the daemon and its agents
and removes the directory.
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentmaild.cli.common import STATE, JsonOpt, command, out

if TYPE_CHECKING:
    from agentmaild.cli.demo_team import Team
    from agentmaild.store.base import MailStore

TASKS = ("add a --verbose flag", "fix the flaky test", "write the changelog",
         "rename the config key", "speed up the inbox query")  # fmt: skip
LOOK_S = 0.2


class _Stop(Exception):
    """SIGTERM, turned into the same clean exit as Ctrl-C."""


def _on_term(signum: int, frame: object) -> None:
    raise _Stop


@command
def demo(
    for_s: Annotated[
        float | None,
        typer.Option(
            "--for",
            min=0,
            metavar="SECONDS",
            help="Stop on its own after this many seconds (default: at Ctrl-C).",
        ),
    ] = None,
    every: Annotated[
        float, typer.Option("--every", min=0.5, help="Seconds between the operator's tasks.")
    ] = 3.0,
    as_json: JsonOpt = False,
) -> None:
    """Start a throw-away team of three scripted agents (no model, no API key) that mail each
    other through their own daemon; print the dashboard URL and the mail as it flows. Ctrl-C
    stops it and removes everything it made."""
    from agentmaild.cli.demo_team import start, stop

    as_json = as_json or STATE.json
    previous = signal.signal(signal.SIGTERM, _on_term)
    team = None
    try:
        team = start()
        out(team.describe(), as_json, lambda: _header(team))
        _run(team, for_s, every, quiet=as_json)
    except (KeyboardInterrupt, _Stop):
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        left = stop(team) if team is not None else []
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not as_json and team is not None:
        typer.echo("stopped: daemon and agents ended, " + (
            "; ".join(left) if left else f"{team.dir} removed"))  # fmt: skip
    if left:
        raise typer.Exit(1)


def _header(team: Team) -> None:
    script = f"{team.script} ROLE"
    typer.echo("agentmaild demo: three scripted agents (no model, no API key) and their daemon")
    typer.echo(f"  dashboard  {team.url}")
    typer.echo(f"  store      {team.db}")
    typer.echo(f"  agents     planner, coder, reviewer: spawn channel, `python {script}`")
    typer.echo(f"  daemon     pid {team.daemon.pid if team.daemon else '-'}, log {team.log}")
    typer.echo(f"  look       agentmaild --db {team.db} status")
    typer.echo("Every few seconds the operator mails the planner a task; planner → coder →")
    typer.echo("reviewer → planner pass it on. Ctrl-C stops the team and removes the directory.")


def _run(team: Team, for_s: float | None, every: float, *, quiet: bool) -> None:
    from agentmaild.hot.access import mailer, poke, store_at

    started = time.monotonic()
    next_task, n = started, 0
    seen: tuple[set[str], set[int]] = (set(), set())
    store = store_at(str(team.db))
    try:
        while for_s is None or time.monotonic() - started < for_s:
            if team.daemon is not None and team.daemon.poll() is not None:
                typer.echo(f"error: the demo's daemon exited ({team.daemon.returncode}); "
                           f"its log: {team.log}", err=True)  # fmt: skip
                raise typer.Exit(1)
            if time.monotonic() >= next_task:
                n += 1
                mailer(store).send(sender="operator", to="planner",
                                   subject=f"task {n}: {TASKS[(n - 1) % len(TASKS)]}",
                                   body="Plan it and hand it on.")  # fmt: skip
                poke(store, ["planner"])
                next_task += every
            for line in _news(store, seen):
                if not quiet:
                    typer.echo(line)
            time.sleep(LOOK_S)
    finally:
        store.close()


def _news(store: MailStore, seen: tuple[set[str], set[int]]) -> list[str]:
    """New messages and finished delivery attempts since the last look, oldest first."""
    messages, attempts = seen
    lines: list[tuple[str, str]] = []
    for m in store.list_messages(limit=50):
        if m.id not in messages:
            messages.add(m.id)
            lines.append((m.created_at, f"mail       {m.from_agent} → {m.to_agent}: "
                                        f"{m.subject!r} ({m.id})"))  # fmt: skip
    for a in store.list_attempts(limit=50):
        if a.id not in attempts:
            attempts.add(a.id)
            lines.append((_stamp(a.at), _attempt_line(a.to_dict())))
    return [f"{at[11:19]}  {text}" for at, text in sorted(lines)]


def _attempt_line(a: dict[str, Any]) -> str:
    n = len(a["message_ids"])
    what = f"{n} message{'s' if n != 1 else ''}"
    error = f": {a['error']}" if a["error"] else ""
    return f"delivery   {what} to {a['agent']}, {a['outcome']}{error} ({a['delivery_id']})"


def _stamp(at: float) -> str:
    from agentmaild.ids import iso_now

    return iso_now(at)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
