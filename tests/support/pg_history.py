"""The history checker of tests/reliability on a PostgreSQL store, plus "the right host only".

``check_pg_history`` copies the store into a fresh SQLite file with ``store copy`` (every row,
delivery id and ack record intact, verified by counts and checksums) and runs
``tests.reliability.history.check_history`` on the copy: the same guarantees, checked by the same
code, as for a SQLite store. Agents of a multi-host run keep one ledger per (host, agent) —
``ledger_name(host, agent)``, the host taken from the delivering daemon's environment — so a
turn run by the wrong host's daemon shows up as a ledger under the wrong host's name.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentmaild.store.copy import copy_store
from agentmaild.store.postgres import PostgresMailStore
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.history import History, check_history

_SEP = "--"


def ledger_name(host: str, agent: str) -> str:
    return f"{host}{_SEP}{agent}.jsonl"


def host_problems(ledger: Sequence[dict[str, Any]], hosts: Mapping[str, str]) -> list[str]:
    """Every turn ran on its agent's host (``hosts``: agent -> host)."""
    problems = []
    for record in ledger:
        host, _, agent = str(record["ledger"]).removesuffix(".jsonl").partition(_SEP)
        if hosts.get(agent) != host:
            problems.append(
                f"turn {record['uuid']} of {agent} ran on {host}, not on {hosts.get(agent)}"
            )
    return problems


def daemon_events(logs: Iterable[Path], event: str) -> list[dict[str, Any]]:
    """The JSON log lines named ``event`` in every log (a killed daemon's torn line skipped)."""
    found = []
    for path in logs:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and row.get("event") == event:
                found.append(row)
    return found


def check_pg_history(
    dsn: str,
    workdir: Path,
    ledger: Sequence[dict[str, Any]],
    sent: Iterable[str],
    *,
    hosts: Mapping[str, str] | None = None,
    acked_events: Sequence[dict[str, Any]] = (),
    settled: bool = True,
) -> History:
    """``check_history`` on a SQLite copy of the PostgreSQL store ``dsn``, plus the host check."""
    copy = workdir / "history-copy.db"
    source = PostgresMailStore(dsn, readonly=True)
    destination = SqliteMailStore(copy)
    try:
        copy_store(source, destination)
    finally:
        source.close()
        destination.close()
    history = check_history(copy, ledger, sent, acked_events=acked_events, settled=settled)
    if hosts is not None:
        history.problems += host_problems(ledger, hosts)
    return history
