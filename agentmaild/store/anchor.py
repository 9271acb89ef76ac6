"""Where a PostgreSQL store lives on this machine: a private directory standing in for the store
file's, for what stays local — the daemon's control socket and the agents' logs.

``anchor_for(dsn)`` is ``$XDG_STATE_HOME/agentmaild/pg-<hash>/store.pg`` (the hash names the
server, port, database and user, never the password). Code that takes a store *path* — the
channels, the log paths, the socket path — is given the anchor; ``store_target`` turns an anchor
back into the DSN where the store itself is named (an agent's ``AGENTMAIL_DB``, a connection).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_TARGETS: dict[str, str] = {}  # anchor path -> DSN, for the anchors this process made
ANCHOR_NAME = "store.pg"


def _state_home() -> Path:
    given = os.environ.get("XDG_STATE_HOME", "")
    return Path(given) if os.path.isabs(given) else Path.home() / ".local" / "state"


def _identity(dsn: str) -> str:
    from agentmaild.store.postgres_tx import redacted

    return redacted(dsn)


def anchor_for(dsn: str) -> Path:
    """The stand-in store path of ``dsn`` on this machine (its directory is not created here)."""
    digest = hashlib.sha256(_identity(dsn).encode()).hexdigest()[:16]
    path = _state_home() / "agentmaild" / f"pg-{digest}" / ANCHOR_NAME
    _TARGETS[str(path)] = dsn
    return path


def store_target(path: Path | str) -> str:
    """What names the store whose path is ``path``: the DSN for an anchor, else the path."""
    return _TARGETS.get(str(path), str(path))


def is_anchor(path: Path | str) -> bool:
    return str(path) in _TARGETS
