"""The PostgreSQL password is never printed (issue 33 item 12): not by ``service install
--print`` (the unit names a 0600 environment file instead), not in any error about a malformed
DSN (libpq quotes the part it choked on, sometimes the whole URI), whichever command hit it.
"""

from __future__ import annotations

import json
import plistlib
from pathlib import Path

import pytest

from tests.security.conftest import run_cli

SECRET = "Pw0rdX9"  # each DSN below holds it, raw or percent-encoded
MALFORMED = [
    f"postgresql://am:{SECRET}@[::1/mail",  # libpq quotes the whole URI
    f"postgresql://am:{SECRET}%zz@db.example/mail",  # ... or the bad token: the password
    f"postgresql://am:{SECRET}@db.example/mail?nonsense_option=1",
    f"postgresql://am@db.example/m%ail?password={SECRET}",
    f"postgres://am:{SECRET[:3]}%25{SECRET[3:]}@db.example/m%",
    f"postgresql://am:{SECRET}@db.example:99999999/mail?connect_timeout=1",
]
COMMANDS = [
    ("status",), ("status", "--json"), ("inbox", "--agent", "x"), ("check", "--agent", "x"),
    ("send", "--to", "x", "--subject", "s", "--json"), ("service", "install", "--print"),
    ("serve",),
]  # fmt: skip


def _no_secret(text: str) -> None:
    for form in (SECRET, SECRET[:3] + "%" + SECRET[3:], SECRET[3:]):
        assert form not in text, text


@pytest.mark.parametrize("dsn", MALFORMED)
def test_no_error_about_a_dsn_shows_its_password(tmp_path: Path, dsn: str) -> None:
    for command in COMMANDS:
        done = run_cli(tmp_path, *command, env={"AGENTMAIL_DB": dsn}, timeout=60)
        said = done.stdout + done.stderr
        assert "Traceback" not in said, (command, said)
        # An error, or (a DSN libpq parses: an unchecked port) the unit, naming no password.
        assert done.returncode != 0 or command[0] == "service", (command, said)
        _no_secret(said)


@pytest.mark.parametrize("kind", ["--systemd", "--launchd"])
def test_the_printed_and_installed_service_never_holds_the_password(
    tmp_path: Path, kind: str
) -> None:
    dsn = f"postgresql://am:{SECRET}@db.example:5433/mail?sslmode=require"
    env = {"AGENTMAIL_DB": dsn, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    env_file = tmp_path / ".config" / "agentmaild" / "service.env"
    printed = run_cli(tmp_path, "service", "install", kind, "--print", env=env)
    assert printed.returncode == 0, printed.stderr
    assert str(env_file) in printed.stdout  # the unit names the file that holds the DSN
    _no_secret(printed.stdout + printed.stderr)
    assert not env_file.exists()  # --print writes nothing
    done = run_cli(tmp_path, "service", "install", kind, "--json", env=env)
    assert done.returncode == 0, done.stderr
    _no_secret(done.stdout + done.stderr)
    written = Path(json.loads(done.stdout)["path"])
    _no_secret(written.read_text())
    if kind == "--launchd":
        assert str(env_file) in plistlib.loads(written.read_bytes())["ProgramArguments"]
    assert env_file.stat().st_mode & 0o777 == 0o600
    assert f"AGENTMAIL_DB='{dsn}'" in env_file.read_text().splitlines()
