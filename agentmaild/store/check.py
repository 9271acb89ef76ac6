"""Integrity checks of a store file: SQLite's own (quick or full) and agentmaild's cross-table ones
(a PostgreSQL store's checks are ``check_postgres``'s, sharing the report and the cross-table SQL).

Read-only: the file is opened ``mode=ro``, never migrated, so a damaged store is examined as it
is. ``serve`` runs the quick form before it opens the store; ``agentmaild store check`` runs either.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

from agentmaild.errors import StoreError
from agentmaild.store.files import modes_warning, refuse_hard_links
from agentmaild.store.migrate import SCHEMA_VERSION

RECOVERY_HINT = (
    "stop agentmaild, keep a copy of the file, list the damage with `agentmaild store check "
    "--full`, rebuild it with the sqlite3 CLI (`sqlite3 mail.db .recover | sqlite3 recovered.db`) "
    "and put recovered.db in its place"
)
_MAX_LISTED = 20
_AGENTMAILD_TABLES = ("messages", "am_agents", "am_deliveries", "am_nudges")
# Cross-table facts SQLite cannot check for us (the schema declares no foreign keys, so that
# Overstory's table stays Overstory's). Each yields a count; non-zero is reported.
STRANDED = (
    "SELECT count(*) FROM messages m WHERE m.read = 0 AND m.delivery_id IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM am_deliveries d WHERE d.id = m.delivery_id)"
)
STALE_NUDGES = (
    "SELECT count(*) FROM am_nudges n "
    "WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = n.message_id)"
)


class CheckReport(NamedTuple):
    path: Path | str  # a PostgreSQL store: its DSN without the password
    full: bool
    problems: list[str]
    warnings: list[str]
    engine: str = "sqlite"  # or "postgresql" (``check_postgres``)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {"ok": self.ok, "store": str(self.path), "check": self.kind(),
                "problems": self.problems, "warnings": self.warnings}

    def kind(self) -> str:
        if self.engine == "postgresql":
            return "pg_amcheck" if self.full else "pg_schema"
        return "integrity_check" if self.full else "quick_check"


def check_store(path: Path, *, full: bool = False, cross: bool = True) -> CheckReport:
    """Run ``PRAGMA quick_check`` (``integrity_check`` when ``full``) and, when ``cross``, the
    cross-table checks. ``StoreError`` when there is no store file to check."""
    if not path.is_file():
        raise StoreError(f"no store at {path}")
    refuse_hard_links(path)
    warnings = [w for w in (modes_warning(path),) if w]
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        return CheckReport(path, full, [f"cannot open: {exc}"], warnings)
    try:
        problems = _sqlite_check(conn, full)
        if not problems and cross:
            problems, more = _cross_checks(conn)
            warnings += more
    finally:
        conn.close()
    return CheckReport(path, full, problems, warnings)


def _sqlite_check(conn: sqlite3.Connection, full: bool) -> list[str]:
    pragma = "integrity_check" if full else "quick_check"
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        rows = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}({_MAX_LISTED})")]
        fk = conn.execute("PRAGMA foreign_key_check").fetchall()
    except sqlite3.DatabaseError as exc:  # a damaged header or schema fails before any row
        return [f"{pragma} failed: {exc}"]
    problems = [] if rows == ["ok"] else _lines(rows)
    problems += [f"foreign key violation: table {r[0]} rowid {r[1]} -> {r[2]}" for r in fk]
    return problems


def _lines(rows: list[str]) -> list[str]:
    """SQLite's report rows as single lines, without its ``*** in database main ***`` headers."""
    lines = (line.strip() for row in rows for line in row.splitlines())
    return [line for line in lines if line and not line.startswith("*** in database")]


def _cross_checks(conn: sqlite3.Connection) -> tuple[list[str], list[str]]:
    """(problems, warnings) agentmaild's tables can have that SQLite's checks do not see."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if version == 0:
        return [], []  # no agentmaild schema yet (empty, or Overstory's): migrated on first use
    missing = [t for t in _AGENTMAILD_TABLES if t not in tables]
    if missing:
        return [f"schema version {version} but table(s) missing: {', '.join(missing)}"], []
    problems, warnings = [], []
    if version > SCHEMA_VERSION:
        warnings.append(f"schema version {version} is newer than this agentmaild's "
                        f"({SCHEMA_VERSION}); upgrade agentmaild")
    stranded = int(conn.execute(STRANDED).fetchone()[0])
    if stranded:
        problems.append(f"{stranded} unread message(s) belong to a delivery that does not exist; "
                        "they would never be delivered")
    stale = int(conn.execute(STALE_NUDGES).fetchone()[0])
    if stale:
        warnings.append(f"{stale} nudge(s) name a message that no longer exists (harmless)")
    return problems, warnings


def refuse_damaged(path: Path) -> None:
    """``serve``'s start-up check: ``StoreError`` naming the recovery when quick_check fails."""
    if not path.exists():
        return
    report = check_store(path, cross=False)
    if not report.ok:
        first = report.problems[0]
        more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
        raise StoreError(
            f"store {path} is damaged (PRAGMA quick_check: {first}{more}); refusing to serve it. "
            f"To recover: {RECOVERY_HINT}"
        )
