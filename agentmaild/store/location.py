"""StoreLocation: which store a target names, as a value — the one place a backend is chosen.

A target is what the user gave (``--db``, ``AGENTMAIL_DB``, ``[store] db``, the project default;
``resolve_location`` picks it): a SQLite file path or a PostgreSQL DSN. ``StoreLocation.of(target)``
turns it into ``(kind, target, local)``:

- ``kind``: ``"sqlite"``, ``"postgres"`` or ``"memory"``. Only ``agentmaild/store/`` may look at it.
- ``target``: the file path (user-expanded) or the DSN, as a connection names it (an agent's
  ``AGENTMAIL_DB``, a child's environment, a connection string).
- ``local``: the store's path *on this machine*: the file itself, or for a PostgreSQL store its
  stand-in ``$XDG_STATE_HOME/agentmaild/pg-<hash>/store.pg`` (the hash names server, port,
  database and user, never the password). The daemon's control socket, the agents' logs, the
  hooks' marker files live beside it (``state_dir``).
- ``shown``: how to name the store to a person: the path, or the DSN without its password.

``store.kinds`` turns a location into a store (``open_store``: the one place a store class is
chosen); ``checked`` here asks whether a target is usable. Everything else asks the value, never
the kind.

The project default is ``<project root>/.agentmail/mail.db`` (Overstory's ``.overstory/mail.db``
when only that exists) where the project root is the main checkout of the git repository, found
*through worktrees* the way ``git rev-parse --git-common-dir`` does it, so an agent in a worktree
and the lead share one store. It reads the ``.git`` files directly instead of spawning git.

Stdlib ``os`` only at import, no dataclasses, no pathlib: the hooks' cold path resolves a location
on every call. hashlib (OpenSSL) loads only for a DSN's stand-in path.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


SQLITE = "sqlite"
POSTGRES = "postgres"
MEMORY = "memory"
DSN_SCHEMES = ("postgresql://", "postgres://")
ANCHOR_NAME = "store.pg"
STORE_DIR = ".agentmail"
OVERSTORY_DIR = ".overstory"  # = overstory.flavor.OVERSTORY_DIR (not imported: hot path)
STORE_FILE = "mail.db"


class StoreLocation:
    """Where one store is, and where its local state lives on this machine (immutable)."""

    __slots__ = ("_local", "kind", "target")

    kind: str
    target: str
    _local: str | None

    def __init__(self, kind: str, target: str, local: str | None = None) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "_local", local)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"StoreLocation is immutable ({name})")

    @classmethod
    def of(cls, target: str | os.PathLike[str] | StoreLocation) -> StoreLocation:
        """The location ``target`` names: a DSN (``postgresql://``/``postgres://``) or a path
        (a location is its own)."""
        if isinstance(target, StoreLocation):
            return target
        given = os.fspath(target)
        if given.startswith(DSN_SCHEMES):
            return cls(POSTGRES, given)  # the stand-in path is worked out when first asked
        path = os.path.expanduser(given)
        return cls(SQLITE, path, path)

    @classmethod
    def memory(cls) -> StoreLocation:
        """The in-memory fake's location: nothing on disk (``is_file`` False)."""
        return cls(MEMORY, ":memory:", ":memory:")

    @property
    def is_file(self) -> bool:
        """True when the store is a file on this machine (it can be checked, watched, copied
        byte for byte); False when it is a server's (or in memory)."""
        return self.kind == SQLITE

    @property
    def shared_by_hosts(self) -> bool:
        """True when daemons on several machines serve the store (each its own host's agents)."""
        return self.kind == POSTGRES

    @property
    def local(self) -> str:
        """The store's path on this machine: its file, or a server store's stand-in."""
        if self._local is None:
            object.__setattr__(self, "_local", _anchor(self.target))
        return self._local  # type: ignore[return-value]  # set just above

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

    def checked(self) -> StoreLocation:
        """This location, once its target is known to be usable as one (nothing is connected
        to: a server may be down); ``UsageError`` for a DSN that cannot be parsed."""
        if self.kind == POSTGRES:
            _check_dsn(self.target)
        return self

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


def _check_dsn(dsn: str) -> None:
    import psycopg  # a DSN's store loads it anyway

    from agentmaild.errors import UsageError

    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        first = (str(exc).strip().splitlines() or ["unparsable"])[0]
        raise UsageError(f"not a usable PostgreSQL DSN: {first}") from exc


def _state_home() -> str:
    given = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(given):
        return given
    return os.path.join(os.path.expanduser("~"), ".local", "state")


def _anchor(dsn: str) -> str:
    import hashlib  # here, not at the top: OpenSSL's load would cost every SQLite hook call

    digest = hashlib.sha256(_identity(dsn).encode()).hexdigest()[:16]
    return os.path.join(_state_home(), "agentmaild", f"pg-{digest}", ANCHOR_NAME)


def _identity(dsn: str) -> str:
    """What names one server's database for one user: the anchor's hash input.

    Kept equal to what earlier releases hashed (psycopg's parse, redacted), so a daemon's
    socket and an agent's logs stay where they were across the upgrade."""
    from agentmaild.store.postgres_tx import redacted as pg_redacted

    return pg_redacted(dsn)


# -- resolution: which store a command means ----------------------------------------------------
def resolve_location(
    flag: str | None = None, env: Mapping[str, str] | None = None, start: str | None = None
) -> StoreLocation:
    """``--db`` (``flag``), else ``$AGENTMAIL_DB``, else the config file's ``[store] db``, else
    the project default for ``start`` (default: the working directory)."""
    environ = os.environ if env is None else env
    given = flag or environ.get("AGENTMAIL_DB") or _configured_db(environ)
    return StoreLocation.of(given if given else default_db(start))


def _configured_db(environ: Mapping[str, str]) -> str | None:
    """``[store] db`` from the config file; the file is only parsed when one exists."""
    if environ.get("AGENTMAILD_STORE_DB"):
        return environ["AGENTMAILD_STORE_DB"]
    explicit = environ.get("AGENTMAILD_CONFIG")
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    xdg = os.path.join(base, "agentmaild", "config.toml")
    if explicit or os.path.isfile(xdg):
        from pathlib import Path

        from agentmaild.config import load_config

        cfg = load_config(Path(explicit) if explicit else None, env=dict(environ))
        if cfg.store.db:
            return str(cfg.store.db)  # the config expanded a path already; a DSN stays as is
    return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().strip()


def _common_dir(marker: str) -> str:
    """The common git dir for ``marker`` (a ``.git`` dir, or a worktree's ``.git`` file)."""
    if os.path.isdir(marker):
        return marker
    text = _read(marker)
    if not text.startswith("gitdir:"):
        return marker
    gitdir = text[len("gitdir:") :].strip()
    gitdir = os.path.realpath(os.path.join(os.path.dirname(marker), gitdir))
    commondir = os.path.join(gitdir, "commondir")
    if os.path.isfile(commondir):
        return os.path.realpath(os.path.join(gitdir, _read(commondir)))
    return gitdir


def project_root(start: str | None = None) -> str | None:
    """The main checkout's root for ``start`` (default: cwd), or None outside any repository."""
    d = os.path.realpath(start or os.getcwd())
    while True:
        marker = os.path.join(d, ".git")
        if os.path.exists(marker):
            common = _common_dir(marker)
            # The main work tree is the parent of a common dir named .git. A bare repository
            # (or --separate-git-dir) has no such tree: its common dir is what every worktree
            # shares, so the store lives there.
            return os.path.dirname(common) if os.path.basename(common) == ".git" else common
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def default_db(start: str | None = None) -> str:
    """``<root>/.agentmail/mail.db``; Overstory's ``<root>/.overstory/mail.db`` when that file
    exists and ``.agentmail/`` does not (an Overstory project: both tools share its store)."""
    root = project_root(start) or os.path.realpath(start or os.getcwd())
    ours = os.path.join(root, STORE_DIR)
    theirs = os.path.join(root, OVERSTORY_DIR, STORE_FILE)
    if not os.path.exists(ours) and os.path.isfile(theirs):
        return theirs
    return os.path.join(ours, STORE_FILE)
