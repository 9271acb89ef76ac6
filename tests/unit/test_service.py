"""Service files: the systemd unit (checked by systemd-analyze), the launchd plist, installation."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentmaild.daemon.service import install_service, uninstall_service
from agentmaild.daemon.service_render import (
    LAUNCHD_LABEL,
    render_env_file,
    render_launchd_plist,
    render_systemd_unit,
)
from agentmaild.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
# The repository's examples are these renders; set AGENTMAILD_REGENERATE_EXAMPLES=1 to rewrite.
EXAMPLE_UNIT = REPO / "systemd" / "agentmaild.service"
EXAMPLE_PLIST = REPO / "systemd" / f"{LAUNCHD_LABEL}.plist"
LINUX_HOME, MAC_HOME = Path("/home/you"), Path("/Users/you")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def example_unit() -> str:
    return render_systemd_unit(
        str(LINUX_HOME / ".local/bin/agentmaild"),
        LINUX_HOME / "project/.agentmail/mail.db",
        None,
        LINUX_HOME / "project",
    )


def example_plist() -> str:
    return render_launchd_plist(
        str(MAC_HOME / ".local/bin/agentmaild"),
        MAC_HOME / "project/.agentmail/mail.db",
        None,
        MAC_HOME / "project",
        log_path=MAC_HOME / "Library/Logs/agentmaild.log",
    )


@pytest.mark.parametrize(
    ("path", "render"), [(EXAMPLE_UNIT, example_unit), (EXAMPLE_PLIST, example_plist)]
)
def test_repository_examples_are_the_renders(path: Path, render: object) -> None:
    assert callable(render)
    text = render()
    if os.environ.get("AGENTMAILD_REGENERATE_EXAMPLES"):
        path.write_text(text)
    assert path.read_text() == text, f"{path} is stale: rerun with AGENTMAILD_REGENERATE_EXAMPLES=1"


# ---- systemd -------------------------------------------------------------------------------


def unit_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_unit_has_the_operational_settings() -> None:
    text = render_systemd_unit(
        "/opt/am/agentmaild",
        Path("/p/mail.db"),
        Path("/p/am.toml"),
        Path("/p"),
        shutdown_grace_s=25,
    )
    lines = unit_lines(text)
    for expected in [
        "[Unit]",
        "[Service]",
        "Type=simple",
        "ExecStart=/opt/am/agentmaild serve --db /p/mail.db --config /p/am.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "WorkingDirectory=/p",
        "Environment=PYTHONUNBUFFERED=1",
        "Restart=on-failure",
        "RestartSec=2",
        "KillMode=mixed",
        "TimeoutStopSec=35",
        "[Install]",
        "WantedBy=default.target",
    ]:
        assert expected in lines


@pytest.mark.parametrize("grace", [0.0, 0.5, 10.0, 59.9])
def test_stop_timeout_exceeds_the_drain_grace(grace: float) -> None:
    text = render_systemd_unit("/x/agentmaild", None, None, Path("/w"), shutdown_grace_s=grace)
    (line,) = [x for x in unit_lines(text) if x.startswith("TimeoutStopSec=")]
    assert int(line.split("=")[1]) >= grace + 10


def test_unit_without_db_or_config_lets_the_daemon_find_the_project() -> None:
    text = render_systemd_unit("/x/agentmaild", None, None, Path("/w"))
    assert "ExecStart=/x/agentmaild serve" in unit_lines(text)


def test_unit_quotes_and_escapes_awkward_paths() -> None:
    text = render_systemd_unit(
        "/a b/agentmaild", Path('/p/100%/$HOME/"q".db'), None, Path("/w 1/50%"), path_env="/u b:/x"
    )
    lines = unit_lines(text)
    assert 'ExecStart="/a b/agentmaild" serve --db "/p/100%%/$$HOME/\\"q\\".db"' in lines
    assert "WorkingDirectory=/w 1/50%%" in lines
    assert 'Environment="PATH=/u b:/x"' in lines


def test_unit_refuses_relative_workdir_and_line_breaks() -> None:
    with pytest.raises(ConfigError, match="absolute"):
        render_systemd_unit("/x/agentmaild", None, None, Path("rel"))
    with pytest.raises(ConfigError, match="line break"):
        render_systemd_unit("/x/agentmaild", Path("/a\nb"), None, Path("/w"))


def systemd_verify(unit: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # --user needs a runtime directory; a private one keeps the check off the host's manager.
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_COLOR": "0"}
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def fake_executable(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "agentmaild"
    shutil.copy("/bin/true", exe)
    return exe




@pytest.mark.parametrize("dirname", ["plain", "with space and 100%"])
def test_systemd_analyze_verifies_the_rendered_unit(tmp_path: Path, dirname: str) -> None:
    base = tmp_path / dirname
    exe = fake_executable(base / "bin")
    (base / "project").mkdir()
    text = render_systemd_unit(
        str(exe), base / "project/mail.db", base / "am.toml", base / "project", path_env="/usr/bin"
    )
    unit = tmp_path / "agentmaild.service"
    unit.write_text(text)
    proc = systemd_verify(unit, tmp_path)
    # verify exits 0 even for unknown keys or unparsable values; those only print warnings.
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", "")


def test_systemd_analyze_check_is_not_vacuous(tmp_path: Path) -> None:
    """The same check flags a unit whose ExecStart is missing and a setting it cannot parse."""
    text = render_systemd_unit(str(tmp_path / "missing/agentmaild"), None, None, tmp_path)
    unit = tmp_path / "agentmaild.service"
    unit.write_text(text.replace("RestartSec=2", "RestartSec=soon"))
    proc = systemd_verify(unit, tmp_path)
    assert proc.returncode != 0
    assert "Failed to parse sec value, ignoring: soon" in proc.stderr
    assert "missing/agentmaild" in proc.stderr


# ---- launchd -------------------------------------------------------------------------------


def test_plist_round_trips_with_the_right_keys(tmp_path: Path) -> None:
    log = tmp_path / "Logs/agentmaild.log"
    text = render_launchd_plist(
        "/opt/am/agentmaild",
        Path("/p/mail.db"),
        Path("/p/am.toml"),
        Path("/p"),
        log_path=log,
        shutdown_grace_s=15,
        path_env="/opt/homebrew/bin:/usr/bin",
    )
    plist = plistlib.loads(text.encode())
    assert plist["Label"] == LAUNCHD_LABEL
    assert plist["ProgramArguments"] == [
        "/opt/am/agentmaild", "serve", "--db", "/p/mail.db", "--config", "/p/am.toml",
    ]  # fmt: skip
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["RunAtLoad"] is True
    assert plist["StandardErrorPath"] == str(log)
    assert plist["StandardOutPath"] == str(log)
    assert plist["WorkingDirectory"] == "/p"
    assert plist["ExitTimeOut"] == 25
    assert plist["EnvironmentVariables"] == {
        "PYTHONUNBUFFERED": "1",
        "PATH": "/opt/homebrew/bin:/usr/bin",
    }


def test_plist_without_db_or_config() -> None:
    text = render_launchd_plist("/x/agentmaild", None, None, Path("/w"), log_path=Path("/l/a.log"))
    assert plistlib.loads(text.encode())["ProgramArguments"] == ["/x/agentmaild", "serve"]


# ---- install -------------------------------------------------------------------------------


def test_install_systemd_writes_the_unit_and_says_what_next(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = install_service(
        "systemd", False, db=Path("/p/mail.db"), config=None, workdir=Path("/p"),
        exe="/x/agentmaild", home=home, path_env="/usr/bin",
    )  # fmt: skip
    assert result.path == home / ".config/systemd/user/agentmaild.service"
    assert result.path.read_text() == result.text
    assert "ExecStart=/x/agentmaild serve --db /p/mail.db" in result.text
    assert "Environment=PATH=/usr/bin" in result.text
    assert "systemctl --user daemon-reload" in result.next_steps
    assert "systemctl --user enable --now agentmaild" in result.next_steps
    again = install_service(
        "systemd", False, db=None, config=None, workdir=Path("/p"), exe="/x/agentmaild", home=home
    )
    assert again.path is not None
    assert again.path.read_text() == again.text  # reinstalling replaces the unit


def test_install_launchd_writes_the_plist(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = install_service(
        "launchd", False, db=None, config=None, workdir=tmp_path, exe="/x/agentmaild", home=home
    )
    assert result.path == home / f"Library/LaunchAgents/{LAUNCHD_LABEL}.plist"
    plist = plistlib.loads(result.path.read_bytes())
    assert plist["StandardErrorPath"] == str(home / "Library/Logs/agentmaild.log")
    assert (home / "Library/Logs").is_dir()
    assert result.next_steps == (f"launchctl load -w {result.path}",)


def test_install_print_only_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = install_service(
        "systemd", True, db=None, config=None, workdir=tmp_path, exe="/x/agentmaild", home=home
    )
    assert result.path is None
    assert "[Service]" in result.text
    assert not home.exists()


def test_install_makes_paths_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = install_service(
        "systemd", True, db=Path("mail.db"), config=Path("am.toml"), workdir=Path("."),
        exe="/x/agentmaild", home=tmp_path,
    )  # fmt: skip
    assert f"--db {tmp_path}/mail.db --config {tmp_path}/am.toml" in result.text
    assert f"WorkingDirectory={tmp_path}" in result.text


# ---- uninstall -----------------------------------------------------------------------------


def installed(kind: str, home: Path) -> Path:
    result = install_service(
        kind,  # type: ignore[arg-type]
        False, db=None, config=None, workdir=home, exe="/x/agentmaild", home=home,
    )  # fmt: skip
    assert result.path is not None and result.path.is_file()
    return result.path


def test_uninstall_systemd_removes_the_unit_and_its_enable_link(tmp_path: Path) -> None:
    unit = installed("systemd", tmp_path)
    wants = unit.parent / "default.target.wants"
    wants.mkdir()
    (wants / unit.name).symlink_to(unit)  # what `systemctl --user enable` makes
    (wants / "other.service").symlink_to(unit.parent / "other.service")
    result = uninstall_service("systemd", False, home=tmp_path)
    assert result.removed
    assert result.paths == (unit, wants / unit.name)
    assert not unit.exists() and not (wants / unit.name).is_symlink()
    assert (wants / "other.service").is_symlink()  # not ours: left alone
    assert result.next_steps == (
        "systemctl --user stop agentmaild",
        "systemctl --user daemon-reload",
    )
    again = uninstall_service("systemd", False, home=tmp_path)
    assert (again.paths, again.removed, again.next_steps) == ((), False, ())


def test_uninstall_launchd_removes_the_plist(tmp_path: Path) -> None:
    plist = installed("launchd", tmp_path)
    result = uninstall_service("launchd", False, home=tmp_path)
    assert result.paths == (plist,) and not plist.exists()
    assert result.next_steps == (f"launchctl remove {LAUNCHD_LABEL}",)


def test_uninstall_print_only_removes_nothing(tmp_path: Path) -> None:
    unit = installed("systemd", tmp_path)
    result = uninstall_service("systemd", True, home=tmp_path)
    assert result.paths == (unit,) and not result.removed
    assert unit.is_file()


@pytest.mark.parametrize("kind", ["systemd", "launchd"])
def test_uninstall_refuses_a_file_it_did_not_write(tmp_path: Path, kind: str) -> None:
    path = installed(kind, tmp_path)
    path.write_text("[Service]\nExecStart=/usr/bin/something-else\n")
    with pytest.raises(ConfigError, match="not written by agentmaild"):
        uninstall_service(kind, False, home=tmp_path)  # type: ignore[arg-type]
    assert path.read_text().startswith("[Service]")


def service_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL", "XDG_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    return subprocess.run(
        [sys.executable, "-m", "agentmaild", "service", *args],
        cwd=home, env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_service_uninstall_cli_undoes_install(tmp_path: Path) -> None:
    unit = tmp_path / ".config/systemd/user/agentmaild.service"
    assert service_cli(tmp_path, "install", "--systemd").returncode == 0
    assert unit.is_file()
    shown = service_cli(tmp_path, "uninstall", "--systemd", "--print")
    assert shown.returncode == 0 and f"would remove {unit}" in shown.stdout
    assert unit.is_file()
    done = service_cli(tmp_path, "uninstall", "--systemd", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "ok": True, "kind": "systemd", "paths": [str(unit)], "removed": True,
        "next_steps": ["systemctl --user stop agentmaild", "systemctl --user daemon-reload"],
    }  # fmt: skip
    assert not unit.exists()
    none = service_cli(tmp_path, "uninstall", "--systemd")
    assert (none.returncode, none.stdout) == (0, "no agentmaild systemd service installed\n")


def test_service_uninstall_cli_refusal_is_one_error_line(tmp_path: Path) -> None:
    unit = tmp_path / ".config/systemd/user/agentmaild.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    proc = service_cli(tmp_path, "uninstall", "--systemd")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"
    as_json = json.loads(service_cli(tmp_path, "uninstall", "--systemd", "--json").stdout)
    assert as_json["ok"] is False and as_json["error"]["code"]


# ---- a PostgreSQL store --------------------------------------------------------------------

DSN = "postgresql://am:s3cr%40t@db.example:5433/mail?sslmode=require"


def test_a_dsn_goes_into_an_environment_file_never_into_the_unit() -> None:
    env_file = Path("/h/.config/agentmaild/service.env")
    text = render_systemd_unit("/x/agentmaild", None, None, Path("/w"), env_file=env_file)
    lines = unit_lines(text)
    assert "ExecStart=/x/agentmaild serve" in lines  # nothing for `ps` to show
    assert f"EnvironmentFile={env_file}" in lines
    assert not [x for x in lines if x.startswith("Environment=AGENTMAIL_DB")]
    plist = plistlib.loads(
        render_launchd_plist(
            "/x/agentmaild", None, None, Path("/w"), log_path=Path("/l/a.log"), env_file=env_file
        ).encode()
    )
    assert plist["ProgramArguments"][3:] == [str(env_file), "/x/agentmaild", "serve"]
    assert "AGENTMAIL_DB" not in plist["EnvironmentVariables"]
    assert render_env_file(DSN) == (
        "# agentmaild service environment (written by `agentmaild service install`; keep it mode "
        f"0600:\n# it holds the store's password)\nAGENTMAIL_DB='{DSN}'\n"
    )
    for bad in ("postgresql://u:it's@h/db", "postgresql://u:p@h/db\nEVIL=1"):
        with pytest.raises(ConfigError, match="percent-encode it"):
            render_env_file(bad)


def test_the_launchd_wrapper_hands_serve_the_dsn_exactly(tmp_path: Path) -> None:
    """The plist's own argv, run by the real sh: serve gets AGENTMAIL_DB byte for byte, even with
    the characters a shell or systemd would otherwise expand."""
    dsn = 'postgresql://am:p$HOME`x`"\\%40 ;&@db.example/mail'
    env_file = tmp_path / "service.env"
    env_file.write_text(render_env_file(dsn))
    exe = tmp_path / "agentmaild"
    exe.write_text('#!/bin/sh\nprintf "%s|%s" "$AGENTMAIL_DB" "$*"\n')
    exe.chmod(0o755)
    plist = plistlib.loads(render_launchd_plist(
        str(exe), None, None, tmp_path, log_path=tmp_path / "a.log", env_file=env_file
    ).encode())  # fmt: skip
    done = subprocess.run(plist["ProgramArguments"], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert (done.returncode, done.stdout) == (0, f"{dsn}|serve"), done.stderr


def test_install_with_a_dsn_writes_an_owner_only_env_file(tmp_path: Path) -> None:
    for kind in ("systemd", "launchd"):
        home = tmp_path / kind
        result = install_service(
            kind, False, db=None, dsn=DSN, config=None, workdir=tmp_path, exe="/x/agentmaild",
            home=home,
        )  # fmt: skip
        env_file = home / ".config/agentmaild/service.env"
        assert result.path is not None and result.env_file == env_file
        assert "s3cr" not in result.path.read_text() and "s3cr" not in result.text
        assert env_file.stat().st_mode & 0o777 == 0o600 and DSN in env_file.read_text()
        gone = uninstall_service(kind, False, home=home)
        assert env_file in gone.paths and not env_file.exists()
    printed = install_service(
        "systemd", True, db=None, dsn=DSN, config=None, workdir=tmp_path, exe="/x/agentmaild",
        home=tmp_path / "printed",
    )  # fmt: skip
    assert "s3cr" not in printed.text and not (tmp_path / "printed").exists()
    plain = install_service(
        "systemd", False, db=tmp_path / "m.db", config=None, workdir=tmp_path,
        exe="/x/agentmaild", home=tmp_path / "plain",
    )  # fmt: skip
    assert plain.path is not None and plain.path.stat().st_mode & 0o077 != 0  # umask's, as before
    assert plain.env_file is None and not (tmp_path / "plain/.config/agentmaild").exists()
    with pytest.raises(ConfigError, match="not both"):
        install_service(
            "systemd", True, db=tmp_path / "m.db", dsn=DSN, config=None, workdir=tmp_path,
            exe="/x/agentmaild", home=tmp_path,
        )  # fmt: skip


def test_systemd_analyze_verifies_a_dsn_unit(tmp_path: Path) -> None:
    exe = fake_executable(tmp_path / "bin")
    env_file = tmp_path / "with space and 100%" / "service.env"
    env_file.parent.mkdir()
    env_file.write_text(render_env_file(DSN))
    text = render_systemd_unit(str(exe), None, None, tmp_path, path_env="/usr/bin",
                               env_file=env_file)  # fmt: skip
    unit = tmp_path / "agentmaild.service"
    unit.write_text(text)
    proc = systemd_verify(unit, tmp_path)
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", "")


def test_service_install_cli_takes_a_dsn(tmp_path: Path) -> None:
    unit = tmp_path / ".config/systemd/user/agentmaild.service"
    env_file = tmp_path / ".config/agentmaild/service.env"
    done = service_cli(tmp_path, "install", "--systemd", "--db", DSN, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] is True and data["path"] == str(unit)
    assert data["env_file"] == str(env_file) and "s3cr" not in done.stdout
    lines = unit_lines(unit.read_text())
    assert f"EnvironmentFile={env_file}" in lines and "s3cr" not in unit.read_text()
    assert [x for x in lines if x.startswith("ExecStart=")] == [
        f"ExecStart={sys.executable.rsplit('/', 1)[0]}/agentmaild serve"
    ]
    assert env_file.stat().st_mode & 0o777 == 0o600
    assert f"AGENTMAIL_DB='{DSN}'" in env_file.read_text().splitlines()


def test_service_install_cli_refuses_an_unparsable_dsn(tmp_path: Path) -> None:
    proc = service_cli(tmp_path, "install", "--db", "postgresql://h/db?nonsense_option=1")
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.startswith("error: not a usable PostgreSQL DSN")
    assert proc.stderr.count("\n") == 1
    assert not (tmp_path / ".config/systemd/user/agentmaild.service").exists()
