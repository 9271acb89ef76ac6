"""How ``status`` prints: the daemon and store lines, the operator's unread note, the agent table.

Pure rendering of the status dict (from the daemon, or the store's own counts when none answers);
``daemon`` gathers it. Its text (a crash reason, a store error) can quote what an agent or a server
wrote, so on a terminal it goes out through ``echo_text``: control characters shown, not obeyed.
Without typer (``cli.plain``'s output), as ``status`` runs.
"""

from __future__ import annotations

import math
from typing import Any

from agentmaild.cli.cost_figures import cost_lines
from agentmaild.cli.plain import echo, echo_text, one_line
from agentmaild.rules.report import queue_lines, rules_line


def print_operator(n: int | None) -> None:
    if n:
        echo(f"operator: {n} unread — agentmaild inbox --agent operator")


def _duration(seconds: float) -> str:
    s = int(seconds)
    h, m = divmod(s // 60, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s % 60:02d}s" if m else f"{s}s"


_COLUMNS = (
    "AGENT",
    "CHANNEL",
    "STATE",
    "MEMBER",
    "EXEC",
    "LOOP",
    "IN TURN",  # the channel's busy signal now; MEMBER's ``busy`` is the registry's "in service"
    "UNREAD",
    "IN FLIGHT",
    "LAST DELIVERY",
    "FAILURES",
    "BACKOFF",
    "DEAD",
    "REASON",
)
_REASON_MAX_CHARS = 48


def _short(seconds: float) -> str:
    s = int(seconds)
    return f"{s}s" if s < 60 else f"{s // 60}m" if s < 3600 else f"{s // 3600}h{s // 60 % 60:02d}m"


def _reason(r: dict[str, Any]) -> str:
    """Why no mail goes in: ``in turn 4m``, ``stuck 12m: pane:no-composer``, ``backoff 12s``."""
    reason, busy_for = r.get("busy_reason"), r.get("busy_for_s")
    if not reason:
        return "-"
    if reason == "backoff":
        text = f"backoff {math.ceil(r.get('backoff_s') or 0)}s"
    elif busy_for is None:
        text = reason
    elif r.get("stuck"):
        text = f"stuck {_short(busy_for)}: {reason}"
    else:
        text = f"{reason} {_short(busy_for)}"
    return text if len(text) <= _REASON_MAX_CHARS else text[: _REASON_MAX_CHARS - 1] + "\u2026"


def _row(r: dict[str, Any]) -> tuple[str, ...]:
    last = r.get("last_delivery") or {}
    last_text = f"{last['result']} {last['at'][11:19]}" if last else "-"
    backoff = r.get("backoff_s") or 0
    return (
        r["agent"],
        r["channel"],
        r["state"],
        r.get("member") or "-",
        r.get("exec") or "-",
        r.get("loop") or "-",
        "yes" if r.get("busy") else "no",
        str(r["unread"]),
        str(r["in_flight"]),
        last_text,
        str(r.get("failures", "-")),
        f"{backoff:.1f}s" if backoff else "-",
        str(r["dead_letters"]),
        _reason(r),
    )


def print_status(status: dict[str, Any]) -> None:
    for warning in status.get("warnings", ()):
        echo(one_line(f"warning: {warning}"), err=True)
    d = status["daemon"]
    if d is None:
        echo_text(f"daemon: {status.get('note') or 'not running'}")
    else:
        echo_text(
            f"daemon: running (pid {d['pid']}, up {_duration(d['uptime_s'])}, "
            f"version {d['version']}{', stopping' if d.get('stopping') else ''})"
        )
    outages = (d or {}).get("outages") or {}
    if outages.get("count"):
        last = outages["recent"][-1]
        echo_text(
            f"store outages: {outages['count']} (open: {', '.join(outages['open']) or 'none'}; "
            f"last: {last['what']} {last['since']} to {last['until'] or 'now'}: {last['error']})"
        )
    for h in status.get("hosts") or ():
        echo_text(f"host {h['host']}: {h['state']} (pid {h['pid']}, last beat {h['age_s']:g}s ago)")
    t = status["totals"]
    echo_text(f"store: {status['store']} ({t['messages']} messages, {t['unread']} unread)")
    print_operator(status.get("operator_unread"))
    rules = rules_line(status.get("rules"))
    if rules is not None:
        echo_text(rules)
    for line in [*queue_lines(status.get("rules")), *cost_lines(status.get("costs"))]:
        echo_text(line)
    rows = [_COLUMNS, *(_row(r) for r in status["agents"])]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    for row in rows:
        echo_text("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    for r, row in zip(status["agents"], rows[1:], strict=True):
        if row[-1].endswith("\u2026"):  # cut to fit the column: the whole reason below the table
            echo_text(f"{r['agent']}: {one_line(str(r.get('busy_reason')))}")
