"""Service files: install and uninstall the systemd user unit and the launchd agent.

What goes in them is rendered by ``service_render``; this module puts it in place (atomically),
says what to run next, and removes only a file it recognises as its own. A PostgreSQL DSN (which may
hold a password) goes into an environment file of its own, written readable by its owner only
(0600 from its first byte), that the unit or plist names; ``--print`` writes nothing and prints
only the unit or plist, so the password is never printed.
"""

from __future__ import annotations

import os
import plistlib
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentmaild.daemon.service_render import (
    DEFAULT_GRACE_S,
    ENV_FILE_HEADER,
    LAUNCHD_LABEL,
    SERVICE_NAME,
    render_env_file,
    render_launchd_plist,
    render_systemd_unit,
)
from agentmaild.errors import ConfigError

ServiceKind = Literal["systemd", "launchd"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceInstall:
    """What ``install_service`` did: the text, where it went (None: printed only), what next;
    ``env_file``: where a PostgreSQL store's DSN goes (written unless printed only)."""

    kind: ServiceKind
    text: str
    path: Path | None
    next_steps: tuple[str, ...]
    env_file: Path | None = None


def install_service(
    kind: ServiceKind,
    print_only: bool,
    *,
    db: Path | None,
    config: Path | None,
    workdir: Path,
    exe: str | None = None,
    home: Path | None = None,
    shutdown_grace_s: float = DEFAULT_GRACE_S,
    path_env: str | None = None,
    dsn: str | None = None,
) -> ServiceInstall:
    """Render the service file with absolute paths; unless ``print_only``, write it in place.

    ``exe`` defaults to :func:`default_executable`, ``home`` to ``Path.home()``, ``path_env`` to
    this process's PATH. ``dsn``: a PostgreSQL store instead of the file ``db``.
    """
    if dsn is not None and db is not None:
        raise ConfigError("a service runs one store: a file or a DSN, not both")
    home = Path.home() if home is None else home
    env_file = env_file_path(home) if dsn is not None else None
    env_text = render_env_file(dsn) if dsn is not None else None  # refused before any write
    render = _systemd_files if kind == "systemd" else _launchd_files
    text, target, steps = render(
        default_executable() if exe is None else exe,
        None if db is None else db.expanduser().absolute(),
        None if config is None else config.expanduser().absolute(),
        workdir.expanduser().absolute(),
        home,
        shutdown_grace_s,
        os.environ.get("PATH") if path_env is None else path_env,
        env_file,
    )
    if print_only:
        return ServiceInstall(kind=kind, text=text, path=None, next_steps=(), env_file=env_file)
    if env_file is not None and env_text is not None:
        _write(env_file, env_text, private=True)  # before the unit that names it
    _write(target, text)
    if kind == "launchd":
        _launchd_log(home).parent.mkdir(parents=True, exist_ok=True)  # launchd will not
    return ServiceInstall(kind=kind, text=text, path=target, next_steps=steps, env_file=env_file)


_Files = tuple[str, Path, tuple[str, ...]]  # text, where it goes, what to run next


def _systemd_files(
    exe: str,
    db: Path | None,
    config: Path | None,
    workdir: Path,
    home: Path,
    grace_s: float,
    path_env: str | None,
    env_file: Path | None,
) -> _Files:
    text = render_systemd_unit(
        exe, db, config, workdir, shutdown_grace_s=grace_s, path_env=path_env, env_file=env_file
    )
    return (
        text,
        _unit_path(home),
        (
            "systemctl --user daemon-reload",
            f"systemctl --user enable --now {SERVICE_NAME}",
            "loginctl enable-linger  # optional: keep it running while you are logged out",
        ),
    )


def _launchd_files(
    exe: str,
    db: Path | None,
    config: Path | None,
    workdir: Path,
    home: Path,
    grace_s: float,
    path_env: str | None,
    env_file: Path | None,
) -> _Files:
    text = render_launchd_plist(
        exe,
        db,
        config,
        workdir,
        log_path=_launchd_log(home),
        shutdown_grace_s=grace_s,
        path_env=path_env,
        env_file=env_file,
    )
    target = _plist_path(home)
    return text, target, (f"launchctl load -w {shlex.quote(str(target))}",)


def _unit_path(home: Path) -> Path:
    return home / ".config" / "systemd" / "user" / f"{SERVICE_NAME}.service"


def _plist_path(home: Path) -> Path:
    return home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def _launchd_log(home: Path) -> Path:
    return home / "Library" / "Logs" / f"{SERVICE_NAME}.log"


def env_file_path(home: Path) -> Path:
    """The service's environment file (a PostgreSQL store's DSN), for systemd and launchd."""
    return home / ".config" / SERVICE_NAME / "service.env"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceUninstall:
    """What ``uninstall_service`` found (and, unless printing only, removed), and what to run."""

    kind: ServiceKind
    paths: tuple[Path, ...]
    removed: bool
    next_steps: tuple[str, ...]


def uninstall_service(
    kind: ServiceKind, print_only: bool, *, home: Path | None = None
) -> ServiceUninstall:
    """Remove the file ``install_service`` wrote (and systemd's enable link to it).

    Nothing installed is not an error (``paths`` is empty). A file at our path that we did not
    render is refused: it is someone else's. The service manager keeps running a removed service
    until told otherwise, hence ``next_steps``; they work after the file is gone.
    """
    home = Path.home() if home is None else home
    steps: tuple[str, ...]
    if kind == "systemd":
        target = _unit_path(home)
        link = target.parent / "default.target.wants" / target.name  # what `enable` made
        links = (link,) if link.is_symlink() and link.resolve() == target.resolve() else ()
        steps = (f"systemctl --user stop {SERVICE_NAME}", "systemctl --user daemon-reload")
    else:
        target, links = _plist_path(home), ()
        steps = (f"launchctl remove {LAUNCHD_LABEL}",)
    if not target.is_file():
        return ServiceUninstall(kind=kind, paths=(), removed=False, next_steps=())
    if not _ours(kind, target):
        raise ConfigError(f"{target} was not written by agentmaild service install; not removed")
    env_file = env_file_path(home)
    ours = env_file.is_file() and env_file.read_bytes().startswith(ENV_FILE_HEADER.encode())
    paths = (target, *links, *((env_file,) if ours else ()))
    if not print_only:
        for path in paths:
            path.unlink(missing_ok=True)
    return ServiceUninstall(kind=kind, paths=paths, removed=not print_only, next_steps=steps)


def _ours(kind: ServiceKind, path: Path) -> bool:
    data = path.read_bytes()
    if kind == "systemd":
        return data.startswith(b"# agentmaild delivery daemon")
    try:
        return bool(plistlib.loads(data).get("Label") == LAUNCHD_LABEL)
    except (plistlib.InvalidFileException, ValueError, AttributeError):
        return False


def default_executable() -> str:
    """The ``agentmaild`` script beside this interpreter (a venv's bin/), else the one on PATH."""
    beside = Path(sys.executable).parent / SERVICE_NAME
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which(SERVICE_NAME)
    if found is None:
        raise ConfigError("cannot find the agentmaild executable; pass its path explicitly")
    return str(Path(found).absolute())


def _write(target: Path, text: str, *, private: bool = False) -> None:
    """``private``: mode 0600 from the first byte (the file may hold a password)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.unlink(missing_ok=True)  # O_CREAT keeps an existing file's mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    tmp.replace(target)  # atomic: a half-written unit is never loaded
