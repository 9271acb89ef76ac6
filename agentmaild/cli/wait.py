"""``agentmaild wait``: block until a message is read, a delivery acked or an agent idle — or say
why it will not be.

Exactly one of ``--read MESSAGE``, ``--acked DELIVERY``, ``--idle AGENT``. The store is looked at
every ``--interval`` seconds (read-only: it never creates a store). It ends at once, exit 1, when
the wait cannot succeed: the message went to the dead letters (their error is printed), the agent
was removed or ended, or its tmux pane is gone or dead (the pane's last lines are printed). At
``--timeout`` it exits 3 with what it was still waiting for and the last delivery attempt's
error, if any (an unavailable agent's reason). The reason goes to stderr; with ``--json`` one
object on stdout either way.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from agentmaild.cli.common import DbOpt, JsonOpt, echo_text, one_line, open_store, out
from agentmaild.cli.wait_checks import Outcome, check_acked, check_idle, check_read
from agentmaild.errors import UsageError
from agentmaild.ids import check_message_id, check_name
from agentmaild.render.framing import visible

TIMED_OUT = 3


def wait(
    read: Annotated[str | None, typer.Option("--read", help="Until this message is read.")] = None,
    acked: Annotated[
        str | None, typer.Option("--acked", help="Until this delivery is acked.")
    ] = None,
    idle: Annotated[str | None, typer.Option("--idle", help="Until this agent is idle.")] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Give up after this many seconds (exit 3).")
    ] = 60.0,
    interval: Annotated[
        float, typer.Option("--interval", min=0.05, help="Seconds between looks at the store.")
    ] = 0.25,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Wait until a message is read, a delivery acked or an agent idle; exit 1 with the reason
    when it cannot happen (dead letter, agent gone, pane dead), 3 at --timeout."""
    given = [(k, v) for k, v in (("read", read), ("acked", acked), ("idle", idle)) if v]
    if len(given) != 1:
        raise UsageError("wait: give exactly one of --read MESSAGE, --acked DELIVERY, --idle AGENT")
    kind, target = given[0]
    if kind == "read":
        check_message_id(target)
    elif kind == "idle":
        check_name(target, loose=True)
    started = time.monotonic()
    with open_store(db, readonly=True, create=False) as store:
        check = {"read": check_read, "acked": check_acked, "idle": check_idle}[kind]
        while True:
            outcome = check(store, target)
            waited = time.monotonic() - started
            if outcome.done or outcome.failed or waited >= timeout:
                break
            time.sleep(min(interval, max(0.0, timeout - waited)))
    _report(kind, target, outcome, round(waited, 3), as_json)


def _report(kind: str, target: str, outcome: Outcome, waited: float, as_json: bool) -> None:
    data: dict[str, Any] = {"ok": outcome.done, "wait": kind, "target": target,
                            "waited_s": waited, **outcome.details}  # fmt: skip
    if outcome.done:
        out(data, as_json, lambda: echo_text(f"{target}: {outcome.why}"))
        return
    code = "failed" if outcome.failed else "timeout"
    why = outcome.why if outcome.failed else f"timed out after {waited:g}s: {outcome.why}"
    data["error"] = {"code": code, "message": why}
    if as_json:
        out(data, True)
    else:
        typer.echo(f"error: {visible(one_line(f'{target}: {why}'))}", err=True)
        for line in outcome.details.get("pane_lines") or ():
            typer.echo(f"  | {visible(line)}", err=True)
    raise typer.Exit(1 if outcome.failed else TIMED_OUT)


def register(app: typer.Typer) -> None:
    from agentmaild.cli.common import command

    app.command("wait")(command(wait))
