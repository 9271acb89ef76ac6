"""What the team costs, for the CLI: the figures ``deliveries --json`` and ``status`` show, and the
``agents budget`` command (see, raise or reset an agent's daily budget).

The figures: per agent and per thread over the last hour and the last day (``HOUR_S``/``DAY_S``,
rolling), each with turns, tokens in and out and the cost in USD (None when no turn of it was
priced by its CLI), and the agents with a budget (``rules.budget``: per UTC day). Light at import:
the store and the rule are imported when a command runs. The figures themselves are
``cli.cost_figures``' (typer-free), re-exported here.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentmaild.cli.common import DbOpt, JsonOpt, command, open_store, out
from agentmaild.cli.cost_figures import DAY_S as DAY_S
from agentmaild.cli.cost_figures import HOUR_S as HOUR_S
from agentmaild.cli.cost_figures import SETTLE_S as SETTLE_S
from agentmaild.cli.cost_figures import THREADS as THREADS
from agentmaild.cli.cost_figures import _money
from agentmaild.cli.cost_figures import cost_lines as cost_lines
from agentmaild.cli.cost_figures import figures as figures
from agentmaild.cli.cost_figures import with_usage as with_usage

BudgetOpt = Annotated[
    float | None,
    typer.Option("--budget-usd", min=0.0, metavar="USD",
                 help="Daily budget (UTC day): delivery pauses once the agent's turns cost this "
                      "much; 0: the team's ([limits] agent_budget_usd)."),
]  # fmt: skip


def with_budget(setting: list[str] | None, budget_usd: float | None) -> list[str] | None:
    """``--budget-usd`` as the agent setting it is stored as (``settings.budget_usd``)."""
    if budget_usd is None:
        return setting
    return [*(setting or []), f"budget_usd={budget_usd:g}"]


@command
def budget(
    name: Annotated[str, typer.Argument(help="The agent.")],
    raise_usd: Annotated[
        float | None,
        typer.Option(
            "--raise",
            min=0.0,
            metavar="USD",
            help="Add USD to today's budget (UTC day); delivery resumes within seconds.",
        ),
    ] = None,
    reset: Annotated[
        bool, typer.Option("--reset", help="Count today's spending again from now.")
    ] = False,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show an agent's daily budget and what it spent today; raise or reset it."""
    import time

    from agentmaild.errors import NotFound, UsageError
    from agentmaild.ids import check_name
    from agentmaild.rules.budget import budget_status, raise_budget, reset_budget

    check_name(name)
    if raise_usd is not None and reset:
        raise UsageError("agents budget: give --raise USD or --reset, not both")
    now = time.time()
    with open_store(db, readonly=raise_usd is None and not reset) as store:
        if store.get_agent(name) is None:
            raise NotFound(f"no agent named {name!r}")
        if raise_usd is not None:
            state = raise_budget(store, name, raise_usd, now)
        elif reset:
            state = reset_budget(store, name, now)
        else:
            state = budget_status(store, name, now)
    assert state is not None
    shown = state.to_dict()
    out({"ok": True, "budget": shown}, as_json, lambda: typer.echo(_budget_line(shown)))


def _budget_line(b: dict[str, Any]) -> str:
    if b["budget_usd"] is None:
        return f"{b['agent']}: no budget; spent {_money(b['spent_usd'])} today (UTC)"
    state = "over budget: paused" if b["over"] else "within budget"
    return (f"{b['agent']}: spent {_money(b['spent_usd'])} of {_money(b['limit_usd'])} today "
            f"(UTC; budget {_money(b['budget_usd'])}, raised {_money(b['raised_usd'])}): "
            f"{state}")  # fmt: skip
