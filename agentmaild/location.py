"""Where the store is: ``--db``, ``AGENTMAIL_DB``, the config file, else the project default.

The project default is ``<project root>/.agentmail/mail.db`` (Overstory's ``.overstory/mail.db``
when only that exists) where the project root is the main
checkout of the git repository, found *through worktrees* the way ``git rev-parse
--git-common-dir`` does it, so an agent in a worktree and the lead share one store. It reads the
``.git`` files directly instead of spawning git, and uses ``os.path`` rather than pathlib: this
runs on every hook call.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

STORE_DIR = ".agentmail"
OVERSTORY_DIR = ".overstory"  # = overstory.flavor.OVERSTORY_DIR (not imported: hot path)
STORE_FILE = "mail.db"
DSN_SCHEMES = ("postgresql://", "postgres://")


def is_dsn(target: str) -> bool:
    """True when ``target`` names a PostgreSQL database rather than a SQLite file."""
    return target.startswith(DSN_SCHEMES)


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


def resolve_db_str(
    flag: str | None, env: Mapping[str, str] | None = None, start: str | None = None
) -> str:
    environ = os.environ if env is None else env
    if flag:
        return flag if is_dsn(flag) else os.path.expanduser(flag)
    if environ.get("AGENTMAIL_DB"):
        given = environ["AGENTMAIL_DB"]
        return given if is_dsn(given) else os.path.expanduser(given)
    configured = _configured_db(environ)
    return configured if configured is not None else default_db(start)


def resolve_db(
    flag: str | None, env: Mapping[str, str] | None = None, start: str | None = None
) -> Path:
    from pathlib import Path

    return Path(resolve_db_str(flag, env, start))


def _configured_db(environ: Mapping[str, str]) -> str | None:
    """``[store] db`` from the config file; the file is only parsed when one exists."""
    explicit = environ.get("AGENTMAILD_CONFIG")
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    xdg = os.path.join(base, "agentmaild", "config.toml")
    if environ.get("AGENTMAILD_STORE_DB"):
        given = environ["AGENTMAILD_STORE_DB"]
        return given if is_dsn(given) else os.path.expanduser(given)
    if explicit or os.path.isfile(xdg):
        from pathlib import Path

        from agentmaild.config import load_config

        cfg = load_config(Path(explicit) if explicit else None, env=dict(environ))
        if cfg.store.db:
            return str(cfg.store.db)  # the config expanded a path already; a DSN stays as is
    return None
