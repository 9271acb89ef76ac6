"""Overstory's side of a shared ``.overstory/`` directory, written from the facts issue 16 states.

Overstory's code is not available to the tests, so this stand-in writes exactly what the issue
describes of ``ov`` 0.11: the ``messages`` table of ``mail.db``; the ``sessions`` table of
``sessions.db`` (``agent_name`` UNIQUE, ``capability``, ``state`` in booting / working / in_turn /
between_turns / completed / stalled / zombie, ``parent_agent``, ``tmux_session``,
``worktree_path``, ``claude_session_id``, ``pid``, …); and the pending-nudge files
``pending-nudges/<agent>.json`` (``{from, reason, subject, messageId, createdAt}``, tab-indented,
one per agent, latest wins), which ``mail check --inject`` reads and deletes. Its ``mail check``
marks what it shows read by setting ``read = 1`` and nothing else; ``mail purge --all`` deletes
rows from ``messages`` only.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import string
import time
from pathlib import Path
from typing import Any

from agentmaild.models import MessageType

TYPES = ",".join(f"'{t.value}'" for t in MessageType)
MAIL_DDL = f"""
CREATE TABLE IF NOT EXISTS messages (
  id TEXT PRIMARY KEY,
  from_agent TEXT NOT NULL,
  to_agent TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  type TEXT NOT NULL DEFAULT 'status' CHECK(type IN ({TYPES})),
  priority TEXT NOT NULL DEFAULT 'normal' CHECK(priority IN ('low','normal','high','urgent')),
  thread_id TEXT,
  payload TEXT,
  read INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX IF NOT EXISTS idx_inbox ON messages(to_agent, read);
CREATE INDEX IF NOT EXISTS idx_thread ON messages(thread_id);
"""
STATES = ("booting", "working", "in_turn", "between_turns", "completed", "stalled", "zombie")
SESSIONS_DDL = f"""
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY,
  agent_name TEXT NOT NULL UNIQUE,
  capability TEXT NOT NULL,
  worktree_path TEXT NOT NULL,
  branch_name TEXT NOT NULL,
  task_id TEXT NOT NULL,
  tmux_session TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'booting' CHECK(state IN ({",".join(f"'{s}'" for s in STATES)})),
  pid INTEGER,
  parent_agent TEXT,
  depth INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL,
  last_activity TEXT NOT NULL,
  claude_session_id TEXT
)
"""
# Overstory nudges for these types at any priority, and for high and urgent mail.
NUDGE_TYPES = {"worker_done", "result", "merge_ready", "error", "escalation", "merge_failed"}
ACTIVE = ("booting", "working", "in_turn", "between_turns", "stalled")


def iso(t: float | None = None) -> str:
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def marker_text(sender: str, reason: str, subject: str, message_id: str, created_at: str) -> str:
    """A marker as Overstory writes it: ``JSON.stringify(marker, null, "\\t")`` plus a newline."""
    return (
        "{\n"
        f'\t"from": {json.dumps(sender, ensure_ascii=False)},\n'
        f'\t"reason": {json.dumps(reason, ensure_ascii=False)},\n'
        f'\t"subject": {json.dumps(subject, ensure_ascii=False)},\n'
        f'\t"messageId": {json.dumps(message_id)},\n'
        f'\t"createdAt": {json.dumps(created_at)}\n'
        "}\n"
    )


class OverstoryProject:
    """``root/.overstory/`` as ``ov init`` and ``ov sling`` leave it, driven like ``ov mail``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / ".overstory"
        self.mail_db = self.dir / "mail.db"
        self.sessions_db = self.dir / "sessions.db"
        self.nudges = self.dir / "pending-nudges"
        self.nudges.mkdir(parents=True, exist_ok=True)
        self._exec(self.mail_db, MAIL_DDL)
        self._exec(self.sessions_db, SESSIONS_DDL)

    @staticmethod
    def _exec(path: Path, script: str, params: tuple[Any, ...] | None = None) -> list[Any]:
        conn = sqlite3.connect(path, timeout=10)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA busy_timeout = 5000")
            if params is None:
                conn.executescript(script)
                return []
            rows = conn.execute(script, params).fetchall()
            conn.commit()
            return rows
        finally:
            conn.close()

    # -- the registry (ov sling / the watchdog) --------------------------------------------------
    def session(
        self, name: str, capability: str, state: str = "working", parent: str | None = None
    ) -> None:
        now = iso()
        self._exec(
            self.sessions_db,
            "INSERT INTO sessions (id, agent_name, capability, worktree_path, branch_name,"
            " task_id, tmux_session, state, pid, parent_agent, started_at, last_activity,"
            " claude_session_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT(agent_name) DO UPDATE SET capability = excluded.capability,"
            " state = excluded.state, parent_agent = excluded.parent_agent",
            (
                f"session-{secrets.token_hex(4)}",
                name,
                capability,
                str(self.dir / "worktrees" / name),
                f"overstory/{name}",
                "task-1",
                f"overstory-{name}",
                state,
                4242,
                parent,
                now,
                now,
                None,
            ),
        )

    def set_state(self, name: str, state: str) -> None:
        self._exec(
            self.sessions_db, "UPDATE sessions SET state = ? WHERE agent_name = ?", (state, name)
        )

    # -- ov mail ---------------------------------------------------------------------------------
    def send(
        self,
        to: str,
        subject: str,
        body: str = "b",
        *,
        sender: str = "orchestrator",
        type: str = "status",
        priority: str = "normal",
    ) -> list[str]:
        """``ov mail send``: a group goes to Overstory's active sessions only (its registry)."""
        if to.startswith("@"):
            cap = to[1:].removesuffix("s")
            rows = self._exec(
                self.sessions_db,
                f"SELECT agent_name FROM sessions WHERE state IN {ACTIVE!r}"
                " AND (? = 'all' OR capability = ?) AND agent_name != ?",
                (to[1:], cap, sender),
            )
            recipients = [r[0] for r in rows]
        else:
            recipients = [to]
        ids = []
        for name in recipients:
            mid = "msg-" + "".join(secrets.choice(string.ascii_lowercase + string.digits)
                                   for _ in range(12))  # fmt: skip
            self._exec(
                self.mail_db,
                "INSERT INTO messages (id, from_agent, to_agent, subject, body, type, priority,"
                " thread_id, payload, read, created_at) VALUES (?,?,?,?,?,?,?,NULL,NULL,0,?)",
                (mid, sender, name, subject, body, type, priority, iso()),
            )
            if priority in ("urgent", "high") or type in NUDGE_TYPES:
                reason = type if type in NUDGE_TYPES else f"{priority} priority"
                self.write_marker(name, sender, reason, subject, mid)
            ids.append(mid)
        return ids

    def write_marker(
        self, agent: str, sender: str, reason: str, subject: str, message_id: str
    ) -> None:
        text = marker_text(sender, reason, subject, message_id, iso())
        (self.nudges / f"{agent}.json").write_text(text, encoding="utf-8")

    def marker(self, agent: str) -> str | None:
        path = self.nudges / f"{agent}.json"
        return path.read_text(encoding="utf-8") if path.exists() else None

    def check(self, agent: str = "orchestrator") -> list[str]:
        """``ov mail check``: unread mail for ``agent`` is shown and marked read (read = 1 only)."""
        rows = self._exec(
            self.mail_db,
            "UPDATE messages SET read = 1 WHERE to_agent = ? AND read = 0 RETURNING id",
            (agent,),
        )
        return sorted(r[0] for r in rows)

    def read(self, message_id: str) -> None:
        """``ov mail read``: marks one message read (``read = 1`` only)."""
        self._exec(self.mail_db, "UPDATE messages SET read = 1 WHERE id = ?", (message_id,))

    def check_inject(self, agent: str) -> tuple[str | None, list[str]]:
        """``ov mail check --inject``: the marker's banner (read and deleted), then the mail."""
        path = self.nudges / f"{agent}.json"
        banner = None
        if path.exists():
            marker = json.loads(path.read_text(encoding="utf-8"))
            path.unlink()
            reason, sender, subject = marker["reason"], marker["from"], marker["subject"]
            banner = f'PRIORITY: {reason} message from {sender} — "{subject}"'
        return banner, self.check(agent)

    def unread(self, agent: str) -> list[str]:
        rows = self._exec(
            self.mail_db,
            "SELECT id FROM messages WHERE to_agent = ? AND read = 0 ORDER BY id",
            (agent,),
        )
        return [r[0] for r in rows]

    def purge_all(self) -> int:
        """``ov mail purge --all``: Overstory knows only its own table."""
        return len(self._exec(self.mail_db, "DELETE FROM messages RETURNING id", ()))
