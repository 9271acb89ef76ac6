"""Config: defaults, the example file, TOML and env parsing, and errors that name the key."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentmaild.config import (
    Config,
    DaemonConfig,
    LimitsConfig,
    LogConfig,
    StdinConfig,
    config_keys,
    env_var,
    find_config_path,
    load_config,
)
from agentmaild.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config.example.toml"
SECTION_ATTR = {
    "store": "store",
    "http": "http",
    "limits": "limits",
    "daemon": "daemon",
    "delivery": "delivery",
    "channels.spawn": "spawn",
    "channels.stdin": "stdin",
    "channels.tmux": "tmux",
    "hooks": "hooks",
    "log": "log",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def value(config: Config, section: str, key: str) -> Any:
    return getattr(getattr(config, SECTION_ATTR[section]), key)


# ---- defaults and the example file ---------------------------------------------------------


def test_defaults_match_the_brief() -> None:
    config = Config.defaults()
    assert config.limits == LimitsConfig(
        subject_max_chars=256,
        body_max_bytes=65536,
        payload_max_bytes=16384,
        unread_max=10000,
        rate_limit_max=0,
        rate_limit_window_s=60.0,
        refuse_unknown_recipients=True,
    )
    assert config.daemon.poll_interval_s == 2.0
    assert config.daemon.socket is None
    assert config.store.db is None
    assert config.spawn.log_max_bytes == 1048576
    assert config.stdin.ack_on == "turn"
    assert config.tmux.paste_settle_s == 0.15
    assert config.hooks.output_max_chars == 10000
    assert config.log == LogConfig(level="info", format="auto", file=None)


def test_example_file_parses_to_exactly_the_defaults() -> None:
    config = load_config(EXAMPLE, env={})
    assert config == Config.defaults()
    assert config.source == EXAMPLE


def test_example_file_documents_every_key() -> None:
    documented: set[tuple[str, str]] = set()
    section = ""
    for line in EXAMPLE.read_text().splitlines():
        if header := re.fullmatch(r"\[([a-z.]+)\]", line.strip()):
            section = header.group(1)
        elif key := re.match(r"#? ?([a-z_]+) = ", line):
            documented.add((section, key.group(1)))
    assert documented == {(section, key) for section, key, _ in config_keys()}


def test_no_file_and_no_env_gives_defaults(tmp_path: Path) -> None:
    config = load_config(env={"HOME": str(tmp_path)})
    assert config == Config.defaults()
    assert config.source is None


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config.defaults().daemon.poll_interval_s = 1.0  # type: ignore[misc]


def test_import_is_stdlib_only_and_defers_tomllib() -> None:
    code = (
        "import sys, agentmaild.config as c; c.load_config(env={'HOME': '/nonexistent'}); "
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(eval(out.stdout))
    assert not loaded & {"structlog", "anyio", "aiosqlite", "typer", "uvloop", "tomllib"}


# ---- environment overrides -----------------------------------------------------------------


def test_env_names() -> None:
    assert env_var("daemon", "poll_interval_s") == "AGENTMAILD_DAEMON_POLL_INTERVAL_S"
    assert env_var("channels.spawn", "stall_timeout_s") == (
        "AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S"
    )
    names = [name for _, _, name in config_keys()]
    assert len(names) == len(set(names)) == 62


def test_env_examples_from_the_brief() -> None:
    config = load_config(
        env={
            "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.5",
            "AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S": "5",
            "AGENTMAILD_LIMITS_RATE_LIMIT_MAX": "10",
        }
    )
    assert config.daemon.poll_interval_s == 0.5
    assert config.spawn.stall_timeout_s == 5.0
    assert isinstance(config.spawn.stall_timeout_s, float)
    assert config.limits.rate_limit_max == 10


def _other_value(current: Any, tmp_path: Path) -> tuple[str, Any]:
    """An environment string for a non-default value of the same type, and what it parses to."""
    if isinstance(current, bool):
        return ("false" if current else "true"), not current
    if isinstance(current, int):
        return str(current + 1), current + 1
    if isinstance(current, float):
        return repr(current / 2), current / 2
    if current is None:
        return str(tmp_path / "x"), tmp_path / "x"
    if current == "":  # http.listen
        return "127.0.0.1:9", "127.0.0.1:9"
    return "", None  # choices: handled below


CHOICE_OTHER = {"ack_on": "write", "level": "debug", "format": "json", "flavor": "overstory",
                "mid_turn_priority": "all"}


@pytest.mark.parametrize(("section", "key", "name"), config_keys())
def test_every_key_can_be_overridden_from_env(
    section: str, key: str, name: str, tmp_path: Path
) -> None:
    default = value(Config.defaults(), section, key)
    text, expected = _other_value(default, tmp_path)
    if key == "host":  # daemon.host: a host name, not HOST:PORT
        text, expected = "host-b", "host-b"
    if key in CHOICE_OTHER:
        text = expected = CHOICE_OTHER[key]
    config = load_config(env={name: text})
    assert value(config, section, key) == expected
    assert type(value(config, section, key)) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", True), ("true", True), ("YES", True), ("on", True),
     ("0", False), ("False", False), ("no", False), (" off ", False)],
)  # fmt: skip
def test_env_booleans(text: str, expected: bool) -> None:
    config = load_config(env={"AGENTMAILD_LIMITS_REFUSE_UNKNOWN_RECIPIENTS": text})
    assert config.limits.refuse_unknown_recipients is expected


def test_env_choices_are_case_insensitive_and_empty_path_means_default() -> None:
    config = load_config(env={"AGENTMAILD_LOG_LEVEL": "DEBUG", "AGENTMAILD_STORE_DB": ""})
    assert config.log.level == "debug"
    assert config.store.db is None


def test_env_path_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = load_config(env={"AGENTMAILD_DAEMON_SOCKET": "~/d.sock"})
    assert config.daemon.socket == tmp_path / "d.sock"


BAD_ENV = [
    ("limits", "body_max_bytes", "x", "limits.body_max_bytes: expected an integer, got 'x'"),
    ("limits", "body_max_bytes", "1.5", "expected an integer, got '1.5'"),
    ("daemon", "poll_interval_s", "soon", "daemon.poll_interval_s: expected a number"),
    ("daemon", "poll_interval_s", "0", "daemon.poll_interval_s: must be > 0, got 0.0"),
    ("daemon", "poll_interval_s", "nan", "daemon.poll_interval_s: must be > 0"),
    ("limits", "refuse_unknown_recipients", "maybe", "expected true or false"),
    ("channels.stdin", "ack_on", "never", "stdin.ack_on: expected one of 'turn', 'write'"),
    ("log", "format", "xml", "log.format: expected one of 'auto', 'json', 'console'"),
    ("log", "level", "loud", "log.level: expected one of"),
    ("http", "listen", "8025", "http.listen: expected HOST:PORT"),
    ("http", "listen", "host:port", "http.listen: expected HOST:PORT"),
]


@pytest.mark.parametrize(("section", "key", "text", "message"), BAD_ENV)
def test_bad_env_values_name_the_key_and_the_variable(
    section: str, key: str, text: str, message: str
) -> None:
    name = env_var(section, key)
    with pytest.raises(ConfigError) as caught:
        load_config(env={name: text})
    assert message in str(caught.value)
    assert f"(from {name})" in str(caught.value)


def test_a_misspelt_agentmaild_env_var_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env={"AGENTMAILD_DAEMON_POLL_INTERVAL": "0.5"})
    assert str(caught.value) == (
        "AGENTMAILD_DAEMON_POLL_INTERVAL: unknown agentmaild environment variable; "
        "did you mean 'AGENTMAILD_DAEMON_POLL_INTERVAL_S'?"
    )
    with pytest.raises(ConfigError, match="AGENTMAILD_SOMETHING_ELSE: unknown"):
        load_config(env={"AGENTMAILD_SOMETHING_ELSE": "1"})


def test_non_config_agentmaild_env_vars_are_allowed() -> None:
    env = {"AGENTMAILD_RELIABILITY_SEED": "7", "AGENTMAILD_CLAUDE_BIN": "/x/claude"}
    assert load_config(env=env) == Config.defaults()


def test_env_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[daemon]\npoll_interval_s = 3\nlease_s = 60\n")
    config = load_config(path, env={"AGENTMAILD_DAEMON_POLL_INTERVAL_S": "0.25"})
    assert config.daemon.poll_interval_s == 0.25
    assert config.daemon.lease_s == 60.0


# ---- the TOML file -------------------------------------------------------------------------


def test_file_values_and_int_for_float(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [limits]
        rate_limit_max = 10
        refuse_unknown_recipients = false
        [daemon]
        poll_interval_s = 1
        [channels.stdin]
        ack_on = "write"
        [channels.tmux]
        enter_retries = 0
        [log]
        level = "WARNING"
        """,
    )
    config = load_config(path, env={})
    assert config.limits.rate_limit_max == 10
    assert config.limits.refuse_unknown_recipients is False
    assert config.daemon.poll_interval_s == 1.0
    assert isinstance(config.daemon.poll_interval_s, float)
    assert config.stdin.ack_on == "write"
    assert config.tmux.enter_retries == 0
    assert config.log.level == "warning"


def test_file_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[store]\ndb = "data/mail.db"\n[log]\nfile = "/var/tmp/a.log"\n')
    config = load_config(path, env={})
    assert config.store.db == tmp_path / "data" / "mail.db"
    assert config.log.file == Path("/var/tmp/a.log")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[limits]\nbody_max_bytes = "x"\n', "limits.body_max_bytes: expected an integer, got 'x'"),
        ("[limits]\nbody_max_bytes = 1.0\n", "limits.body_max_bytes: expected an integer, got 1.0"),
        ("[limits]\nbody_max_bytes = true\n", "expected an integer, got True"),
        ("[daemon]\nlease_s = true\n", "daemon.lease_s: expected a number, got True"),
        ('[daemon]\nlease_s = "5"\n', "daemon.lease_s: expected a number, got '5'"),
        ("[daemon]\nlease_s = inf\n", "daemon.lease_s: must be > 0, got inf"),
        ("[daemon]\nbackoff_jitter = 1.5\n", "daemon.backoff_jitter: must be between 0 and 1"),
        ("[daemon]\nmax_attempts = 0\n", "daemon.max_attempts: must be >= 1, got 0"),
        ("[daemon]\nshutdown_grace_s = -1\n", "daemon.shutdown_grace_s: must be >= 0"),
        ('[limits]\nrefuse_unknown_recipients = "yes"\n', "expected true or false, got 'yes'"),
        ("[log]\nlevel = 3\n", "log.level: expected a string, got 3"),
        ('[store]\ndb = ""\n', "store.db: expected a non-empty path string"),
        ("[store]\ndb = 5\n", "store.db: expected a non-empty path string, got 5"),
        ("[daemon]\npoll_interval = 2\n", "unknown key; did you mean 'poll_interval_s'?"),
        ("[deamon]\n", "unknown section [deamon]; did you mean 'daemon'?"),
        ("[channels.ssh]\n", "unknown section [channels.ssh]"),
        ("channels = 1\n", "channels: expected a table, got 1"),
        ("limits = 5\n", "limits: expected a table, got 5"),
    ],
)
def test_bad_file_values_name_the_key_and_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


def test_cross_field_order_is_checked(tmp_path: Path) -> None:
    path = write(tmp_path, "[channels.stdin]\nrestart_backoff_initial_s = 90\n")
    with pytest.raises(ConfigError, match=r"channels\.stdin\.restart_backoff_initial_s: must not"):
        load_config(path, env={})


def test_bad_toml_syntax_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[daemon]\npoll_interval_s = 2.0\nlease_s 300\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(path) in str(caught.value)
    assert "line 3" in str(caught.value)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'[log]\nlevel = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path, env={})


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml", env={})


def test_every_built_in_default_passes_the_checks() -> None:
    """A section skips its checks for a value that is its built-in default (``Section``'s
    ``__post_init__``: cheap for a cold command), so every default must pass them here."""
    from agentmaild.config.fields import value_problem
    from agentmaild.config.sections import _SECTIONS

    for section, (_, cls) in _SECTIONS.items():
        for f in dataclasses.fields(cls):
            assert f.default is not dataclasses.MISSING, (section, f.name)
            assert value_problem(cls, f.name, f.default) is None, (section, f.name, f.default)
        built = cls()
        for low, high in cls._ordered:
            assert getattr(built, low) <= getattr(built, high), (section, low, high)


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ConfigError, match=r"daemon\.poll_interval_s: must be > 0"):
        DaemonConfig(poll_interval_s=0)
    with pytest.raises(ConfigError, match=r"daemon\.backoff_initial_s: must not exceed"):
        DaemonConfig(backoff_initial_s=10.0, backoff_max_s=1.0)
    with pytest.raises(ConfigError, match=r"channels\.stdin\.ack_on"):
        StdinConfig(ack_on="later")  # type: ignore[arg-type]


# ---- where the file is found ---------------------------------------------------------------


def test_agentmaild_config_env_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[daemon]\nlease_s = 7\n")
    env = {"AGENTMAILD_CONFIG": str(path), "HOME": str(tmp_path)}
    assert find_config_path(env) == path
    assert load_config(env=env).daemon.lease_s == 7.0


def test_agentmaild_config_env_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(env={"AGENTMAILD_CONFIG": str(tmp_path / "missing.toml")})


def test_xdg_config_home_then_home_dot_config(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    for base in (home / ".config", xdg):
        (base / "agentmaild").mkdir(parents=True)
        (base / "agentmaild" / "config.toml").write_text(f'[store]\ndb = "{base}.db"\n')
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(xdg)}
    assert load_config(env=env).store.db == Path(f"{xdg}.db")
    assert load_config(env={"HOME": str(home)}).store.db == Path(f"{home / '.config'}.db")
    relative_xdg = {"HOME": str(home), "XDG_CONFIG_HOME": "relative/dir"}  # ignored per XDG
    assert find_config_path(relative_xdg) == home / ".config" / "agentmaild" / "config.toml"


def test_explicit_path_beats_env(tmp_path: Path) -> None:
    explicit = write(tmp_path, "[daemon]\nlease_s = 1\n")
    other = tmp_path / "other.toml"
    other.write_text("[daemon]\nlease_s = 2\n")
    config = load_config(explicit, env={"AGENTMAILD_CONFIG": str(other)})
    assert config.daemon.lease_s == 1.0
