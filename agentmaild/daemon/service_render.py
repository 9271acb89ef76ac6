"""The service files' text: the systemd user unit and the launchd agent plist for ``serve``.

The repository's ``systemd/`` files are examples produced by these functions (a test keeps them
equal), so the rendering here is the one source of truth; ``service`` installs what they render.

A PostgreSQL store goes in as ``AGENTMAIL_DB`` in the service's environment, read from an
environment file of its own (mode 0600, ``render_env_file``) that the unit or plist names: never on
the command line (every user sees it in ``ps``), nor in the unit or plist (which ``--print`` shows
and the service manager lets any user read), since a DSN may hold a password.
"""

from __future__ import annotations

import math
import plistlib
from pathlib import Path

from agentmaild.config import DaemonConfig
from agentmaild.errors import ConfigError

SERVICE_NAME = "agentmaild"
LAUNCHD_LABEL = "dev.agentmaild.agentmaild"
# systemd/launchd send SIGTERM, wait this much longer than the daemon's own drain deadline,
# then SIGKILL: the daemon must get to release its claims and reap its children first.
STOP_MARGIN_S = 10
DEFAULT_GRACE_S = DaemonConfig().shutdown_grace_s


def serve_argv(exe: str, db: Path | None, config: Path | None) -> list[str]:
    argv = [exe, "serve"]
    if db is not None:
        argv += ["--db", str(db)]
    if config is not None:
        argv += ["--config", str(config)]
    return argv


def stop_timeout_s(shutdown_grace_s: float) -> int:
    return math.ceil(shutdown_grace_s) + STOP_MARGIN_S


_SYSTEMD_HEADER = (
    "# agentmaild delivery daemon, a systemd user unit.",
    "# Rendered for these paths by `agentmaild service install --systemd [--print]`,",
    "# which installs it as ~/.config/systemd/user/agentmaild.service;",
    "# then: systemctl --user daemon-reload && systemctl --user enable --now agentmaild",
    "",
)


def render_systemd_unit(
    exe: str,
    db: Path | None,
    config: Path | None,
    workdir: Path,
    *,
    shutdown_grace_s: float = DEFAULT_GRACE_S,
    path_env: str | None = None,
    env_file: Path | None = None,
) -> str:
    """A systemd *user* unit running ``<exe> serve``.

    ``path_env``: a PATH for the daemon's children (``claude``, ``tmux``); a user manager's own
    PATH often lacks ~/.local/bin and friends, so ``install_service`` passes the caller's.
    ``env_file``: the file holding a PostgreSQL store's ``AGENTMAIL_DB`` (then ``db`` is None).
    """
    _require_absolute(workdir, "workdir")
    # ExecStart= expands $VAR, Environment= does not: only the command line doubles its "$".
    exec_start = " ".join(_systemd_word(a.replace("$", "$$")) for a in serve_argv(exe, db, config))
    env = ["Environment=PYTHONUNBUFFERED=1"]
    if path_env:
        env.append(f"Environment={_systemd_word(f'PATH={path_env}')}")
    secret = [] if env_file is None else [
        "# AGENTMAIL_DB, the PostgreSQL store (password included), is read from this file, mode",
        "# 0600, which `agentmaild service install` writes: it never goes into the unit itself.",
        f"EnvironmentFile={_systemd_escape(str(env_file))}",
    ]  # fmt: skip
    return "\n".join(
        [
            *_SYSTEMD_HEADER,
            "[Unit]",
            "Description=agentmaild mail delivery daemon for AI coding agents",
            # Give up after 5 failed starts a minute (e.g. another daemon holds the store lock).
            "StartLimitIntervalSec=60",
            "StartLimitBurst=5",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={exec_start}",
            "ExecReload=/bin/kill -HUP $MAINPID",
            f"WorkingDirectory={_systemd_escape(str(workdir))}",
            *env,
            *secret,
            "Restart=on-failure",
            "RestartSec=2",
            # mixed: SIGTERM to the daemon only, so it drains and stops its own children (agent
            # turns, in their own process groups); SIGKILL to the whole cgroup at the timeout.
            "KillMode=mixed",
            # the daemon makes a cgroup per agent turn below its own (procs.cgroups)
            "Delegate=yes",
            f"TimeoutStopSec={stop_timeout_s(shutdown_grace_s)}",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def render_launchd_plist(
    exe: str,
    db: Path | None,
    config: Path | None,
    workdir: Path,
    *,
    log_path: Path,
    shutdown_grace_s: float = DEFAULT_GRACE_S,
    path_env: str | None = None,
    env_file: Path | None = None,
) -> str:
    """A launchd agent running ``<exe> serve``, restarted on failure.

    ``env_file``: as systemd's; launchd has no such key, so ``sh`` reads the file (exporting what
    it sets) and then becomes ``serve``: the plist names the file, never the DSN."""
    _require_absolute(workdir, "workdir")
    _require_absolute(log_path, "log_path")
    env = {"PYTHONUNBUFFERED": "1"}
    if path_env:
        env["PATH"] = path_env  # launchd's default PATH is /usr/bin:/bin:/usr/sbin:/sbin
    argv = serve_argv(exe, db, config)
    if env_file is not None:
        argv = ["/bin/sh", "-c", 'set -a && . "$0" && exec "$@"', str(env_file), *argv]
    plist = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": argv,
        "WorkingDirectory": str(workdir),
        "EnvironmentVariables": env,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # like Restart=on-failure
        "ExitTimeOut": stop_timeout_s(shutdown_grace_s),  # SIGTERM → this long → SIGKILL
        "StandardOutPath": str(log_path),
        "StandardErrorPath": str(log_path),
    }
    return plistlib.dumps(plist, sort_keys=False).decode("utf-8")


ENV_FILE_HEADER = "# agentmaild service environment"


def render_env_file(dsn: str) -> str:
    """The service's environment file: ``AGENTMAIL_DB`` single-quoted, which systemd's
    ``EnvironmentFile=`` and ``sh``'s ``.`` both read as written (no escapes inside)."""
    if any(c in dsn for c in "'\n\r\0"):
        raise ConfigError("the PostgreSQL DSN holds a quote or a line break; percent-encode it "
                          "(' is %27) for the service's environment file")  # fmt: skip
    return (f"{ENV_FILE_HEADER} (written by `agentmaild service install`; keep it mode 0600:\n"
            f"# it holds the store's password)\nAGENTMAIL_DB='{dsn}'\n")  # fmt: skip


def _require_absolute(path: Path, what: str) -> None:
    if not path.is_absolute():
        raise ConfigError(f"{what} must be an absolute path, got {str(path)!r}")


def _systemd_escape(text: str) -> str:
    """Escape specifier expansion (``%``); refuse what a unit line cannot hold."""
    if "\n" in text or "\r" in text:
        raise ConfigError(f"a service file cannot hold a line break: {text!r}")
    return text.replace("%", "%%")


def _systemd_word(arg: str) -> str:
    """Quote one word of ExecStart= or Environment= (systemd.service, "Command lines")."""
    word = _systemd_escape(arg)
    if word and not any(c in word for c in " \t\"'\\;"):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
