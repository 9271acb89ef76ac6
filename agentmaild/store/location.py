"""StoreLocation: which store a target names, as a value — the one place a backend is chosen.

A target is what the user gave (``--db``, ``AGENTMAIL_DB``, ``[store] db``, the project default):
a SQLite file path or a PostgreSQL DSN. ``StoreLocation.of(target)`` turns it into
``(kind, target, local)``:

- ``kind``: ``"sqlite"`` or ``"postgres"``. Only ``agentmaild/store/`` may look at it.
- ``target``: the file path (user-expanded) or the DSN, as a connection names it (an agent's
  ``AGENTMAIL_DB``, a child's environment, a connection string).
- ``local``: the store's path *on this machine*: the file itself, or for a PostgreSQL store its
  stand-in ``$XDG_STATE_HOME/agentmaild/pg-<hash>/store.pg`` (the hash names server, port,
  database and user, never the password). The daemon's control socket, the agents' logs, the
  hooks' marker files live beside it (``state_dir``).
- ``shown``: how to name the store to a person: the path, or the DSN without its password.

Stdlib only and no dataclasses: the hooks' cold path builds one on every call.
"""

from __future__ import annotations

import hashlib
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

SQLITE = "sqlite"
POSTGRES = "postgres"
DSN_SCHEMES = ("postgresql://", "postgres://")
ANCHOR_NAME = "store.pg"


class StoreLocation:
    """Where one store is, and where its local state lives on this machine (immutable)."""

    __slots__ = ("kind", "local", "target")

    kind: str
    target: str
    local: str

    def __init__(self, kind: str, target: str, local: str) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "local", local)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"StoreLocation is immutable ({name})")

    @classmethod
    def of(cls, target: str | os.PathLike[str]) -> StoreLocation:
        """The location ``target`` names: a DSN (``postgresql://``/``postgres://``) or a path."""
        given = os.fspath(target)
        if given.startswith(DSN_SCHEMES):
            return cls(POSTGRES, given, _anchor(given))
        path = os.path.expanduser(given)
        return cls(SQLITE, path, path)

    @property
    def is_file(self) -> bool:
        """True when the store is a file on this machine (it can be checked, watched, copied
        byte for byte); False when it is a server's."""
        return self.kind == SQLITE

    @property
    def local_path(self) -> Path:
        from pathlib import Path

        return Path(self.local)

    @property
    def state_dir(self) -> Path:
        """The private directory for what stays on this machine (socket, logs, markers)."""
        return self.local_path.parent

    @property
    def shown(self) -> str:
        return redacted(self.target) if self.kind == POSTGRES else self.target

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoreLocation) and (self.kind, self.target) == (
            other.kind,
            other.target,
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.target))

    def __repr__(self) -> str:
        return f"StoreLocation({self.kind!r}, {self.shown!r})"


def redacted(dsn: str) -> str:
    """A DSN fit to show: ``postgresql://user@host:port/dbname``, never the password.

    Parsed without psycopg (hot paths name stores too): URL-form DSNs only, which is what
    ``StoreLocation.of`` accepts."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(dsn)
        port = parts.port or 5432
    except ValueError:
        return "<unparsable DSN>"
    user = parts.username or ""
    host = parts.hostname or "localhost"
    return f"postgresql://{user}@{host}:{port}/{parts.path.lstrip('/')}"


def _state_home() -> str:
    given = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(given):
        return given
    return os.path.join(os.path.expanduser("~"), ".local", "state")


def _anchor(dsn: str) -> str:
    digest = hashlib.sha256(_identity(dsn).encode()).hexdigest()[:16]
    return os.path.join(_state_home(), "agentmaild", f"pg-{digest}", ANCHOR_NAME)


def _identity(dsn: str) -> str:
    """What names one server's database for one user: the anchor's hash input.

    Kept equal to what earlier releases hashed (psycopg's parse, redacted), so a daemon's
    socket and an agent's logs stay where they were across the upgrade."""
    from agentmaild.store.postgres_tx import redacted as pg_redacted

    return pg_redacted(dsn)
