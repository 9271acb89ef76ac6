"""Overstory's pending-nudge files: ``<store dir>/pending-nudges/<agent>.json``, latest wins.

The format is Overstory's exactly: ``{from, reason, subject, messageId, createdAt}`` in that
order, tab-indented, one trailing newline; its ``mail check --inject`` reads and deletes the file
and prints ``PRIORITY: <reason> message from <from> — "<subject>"`` before the mail. Stdlib only
(json, os): the hook path reads these files on every prompt.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

NUDGE_DIR = "pending-nudges"
# Types Overstory nudges for whatever their priority; the reason is then the type itself.
OVERSTORY_NUDGE_TYPES = frozenset(
    {"worker_done", "result", "merge_ready", "error", "escalation", "merge_failed"}
)
_KEYS = ("from", "reason", "subject", "messageId", "createdAt")


def nudge_dir(db: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(db)), NUDGE_DIR)


def nudge_path(directory: str, agent: str) -> str:
    """The marker of ``agent``; ValueError for a name that is no plain file name.

    Our names never are (``ids.check_name``), but a recipient in a row another tool wrote may be
    anything: such a name must not lead a rename or delete out of the directory.
    """
    if not agent or agent.startswith(".") or any(c in agent for c in "/\\\x00"):
        raise ValueError(f"not a plain file name: {agent!r}")
    return os.path.join(directory, agent + ".json")


def reason_for(msg_type: str, priority: str) -> str:
    """Overstory's reason text: the type for its nudging types, else ``<priority> priority``."""
    return msg_type if msg_type in OVERSTORY_NUDGE_TYPES else f"{priority} priority"


def render(marker: dict[str, Any]) -> str:
    """The file's text, byte for byte what Overstory writes (``JSON.stringify(m, null, "\\t")``)."""
    ordered = {k: marker[k] for k in _KEYS}
    return json.dumps(ordered, indent="\t", ensure_ascii=False) + "\n"


def write(directory: str, agent: str, marker: dict[str, Any]) -> None:
    """Replace ``agent``'s marker atomically (a reader never sees half a file)."""
    path = nudge_path(directory, agent)
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(render(marker))
    os.replace(tmp, path)


def take(directory: str, agent: str) -> dict[str, Any] | None:
    """Read and delete ``agent``'s marker, as ``ov mail check --inject`` does; None if none.

    A corrupt marker is deleted and ignored (Overstory does the same).
    """
    try:
        path = nudge_path(directory, agent)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, ValueError):
        return None  # none, or unreadable: leave it to Overstory, never break a hook
    _unlink(path)
    try:
        marker = json.loads(text)
    except ValueError:
        return None
    if not isinstance(marker, dict) or not all(isinstance(marker.get(k), str) for k in _KEYS):
        return None
    return marker


def clear_pointing_at(directory: str, agent: str, message_ids: Iterable[str]) -> bool:
    """Delete ``agent``'s marker if it names one of ``message_ids`` (that mail was acked).

    The marker is moved aside first, so a newer one written meanwhile is never the one deleted:
    when the one taken names other mail it goes back, unless a newer one took its place.
    """
    try:
        path = nudge_path(directory, agent)
        aside = f"{path}.{os.getpid()}.acking"
        os.rename(path, aside)
    except (OSError, ValueError):
        return False
    try:
        with open(aside, encoding="utf-8") as f:
            marker = json.loads(f.read())
        target = marker.get("messageId") if isinstance(marker, dict) else None
    except (OSError, ValueError):
        target = None
    if target is not None and target not in set(message_ids):
        try:
            os.link(aside, path)  # fails if a newer marker is there: the newer one wins
        except OSError:
            pass
        _unlink(aside)
        return False
    _unlink(aside)
    return True


def banner(marker: dict[str, Any]) -> str:
    """Overstory's banner line for a marker; the subject JSON-quoted (as ours are), so a crafted
    one cannot start a line of its own."""
    reason, sender = _one_line(marker["reason"]), _one_line(marker["from"])
    subject = json.dumps(marker["subject"], ensure_ascii=False)
    return f"PRIORITY: {reason} message from {sender} — {subject}"


def _one_line(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def take_banner(
    db: str,
    agent: str,
    taken: Sequence[str],
    is_read: Callable[[str], bool],
    is_ours: Callable[[str], bool],
) -> str:
    """Take ``agent``'s marker for mail being shown now (``taken``); its banner line, or "".

    No banner when the mail it names was read meanwhile (stale: ``is_read``), or when our own
    PRIORITY banner already names it (``is_ours``: agentmaild writes both for its priority mail
    in Overstory mode). The store answers both questions (``store.port_sqlite``).
    """
    marker = take(nudge_dir(db), agent) if db else None
    if marker is None:
        return ""
    mid = marker["messageId"]
    if is_read(mid) or (mid in taken and is_ours(mid)):
        return ""
    return banner(marker)
