"""A shim over ``StoreLocation`` for the callers that still pass a PostgreSQL store as a path.

``anchor_for(dsn)`` is ``StoreLocation.of(dsn).local_path`` (the store's stand-in path on this
machine); ``store_target`` and ``is_anchor`` turn such a path back into its DSN, for the anchors
this process made. New code holds the ``StoreLocation`` instead and never needs the way back;
this module goes when its last caller (``daemon/``, ``hooks/``, ``channels/tmux_pg``) does.
"""

from __future__ import annotations

from pathlib import Path

from agentmaild.store.location import ANCHOR_NAME as ANCHOR_NAME
from agentmaild.store.location import StoreLocation

_TARGETS: dict[str, str] = {}  # anchor path -> DSN, for the anchors this process made


def anchor_for(dsn: str) -> Path:
    """The stand-in store path of ``dsn`` on this machine (its directory is not created here)."""
    path = StoreLocation.of(dsn).local_path
    _TARGETS[str(path)] = dsn
    return path


def store_target(path: Path | str) -> str:
    """What names the store whose path is ``path``: the DSN for an anchor, else the path."""
    return _TARGETS.get(str(path), str(path))


def is_anchor(path: Path | str) -> bool:
    return str(path) in _TARGETS
