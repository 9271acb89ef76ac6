"""Configuration: frozen dataclasses built once from a TOML file plus ``AGENTMAILD_*`` overrides.

Precedence, lowest first: built-in defaults, the TOML file, ``AGENTMAILD_<SECTION>_<KEY>``
environment variables (``AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S=5``). Unknown keys and wrong
types are errors, and every error is a ConfigError naming the key (``limits.body_max_bytes``) and
where the value came from. Only the standard library is imported: the CLI's hot paths load this
module, so tomllib (~20 ms cold) is imported only when there is a file to read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple, get_args, get_origin, get_type_hints

from agentmaild.errors import ConfigError

ENV_PREFIX = "AGENTMAILD_"
CONFIG_ENV = "AGENTMAILD_CONFIG"

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LogFormat = Literal["auto", "json", "console"]
AckOn = Literal["turn", "write"]


class _Bound:
    """An allowed numeric range. A plain class: each dataclass costs ~1 ms at import."""

    __slots__ = ("high", "low", "strict")

    def __init__(self, low: float, *, strict: bool = False, high: float | None = None) -> None:
        self.low = low
        self.strict = strict  # True: value > low; False: value >= low
        self.high = high

    def admits(self, value: float) -> bool:
        above = value > self.low if self.strict else value >= self.low
        return math.isfinite(value) and above and (self.high is None or value <= self.high)

    def __str__(self) -> str:
        if self.high is not None:
            return f"between {self.low:g} and {self.high:g}"
        return f"{'>' if self.strict else '>='} {self.low:g}"


_POSITIVE = _Bound(0, strict=True)
_NON_NEGATIVE = _Bound(0)
_AT_LEAST_ONE = _Bound(1)
_FRACTION = _Bound(0, high=1)


class _Section:
    """Validation shared by every section; the dataclass calls ``__post_init__``."""

    __slots__ = ()
    _bounds: ClassVar[Mapping[str, _Bound]] = {}
    _ordered: ClassVar[tuple[tuple[str, str], ...]] = ()  # (a, b): a must not exceed b

    def __post_init__(self) -> None:
        for name in _specs(type(self)):
            problem = _problem(type(self), name, getattr(self, name))
            if problem is not None:
                raise ConfigError(f"{_section_name(type(self))}.{name}: {problem}")
        for low, high in self._ordered:
            if getattr(self, low) > getattr(self, high):
                section = _section_name(type(self))
                raise ConfigError(
                    f"{section}.{low}: must not exceed {section}.{high} "
                    f"({getattr(self, low)!r} > {getattr(self, high)!r})"
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig(_Section):
    db: Path | None = None  # None: the project default, <project root>/.agentmail/mail.db


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitsConfig(_Section):
    subject_max_chars: int = 256
    body_max_bytes: int = 65536
    payload_max_bytes: int = 16384
    unread_max: int = 10000
    rate_limit_max: int = 0  # 0: no rate limit
    rate_limit_window_s: float = 60.0
    refuse_unknown_recipients: bool = True

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "subject_max_chars": _AT_LEAST_ONE,
        "body_max_bytes": _AT_LEAST_ONE,
        "payload_max_bytes": _AT_LEAST_ONE,
        "unread_max": _AT_LEAST_ONE,
        "rate_limit_max": _NON_NEGATIVE,
        "rate_limit_window_s": _POSITIVE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig(_Section):
    poll_interval_s: float = 2.0
    lease_s: float = 300.0
    batch_max_messages: int = 20
    batch_max_chars: int = 10000
    max_attempts: int = 5
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 300.0
    backoff_jitter: float = 0.2
    shutdown_grace_s: float = 10.0
    checkpoint_interval_s: float = 30.0
    wal_checkpoint_pages: int = 1000
    socket: Path | None = None  # None: beside the store (or under $XDG_RUNTIME_DIR)

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "poll_interval_s": _POSITIVE,
        "lease_s": _POSITIVE,
        "batch_max_messages": _AT_LEAST_ONE,
        "batch_max_chars": _AT_LEAST_ONE,
        "max_attempts": _AT_LEAST_ONE,
        "backoff_initial_s": _NON_NEGATIVE,
        "backoff_max_s": _NON_NEGATIVE,
        "backoff_jitter": _FRACTION,
        "shutdown_grace_s": _NON_NEGATIVE,
        "checkpoint_interval_s": _POSITIVE,
        "wal_checkpoint_pages": _NON_NEGATIVE,
    }
    _ordered: ClassVar[tuple[tuple[str, str], ...]] = (("backoff_initial_s", "backoff_max_s"),)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnConfig(_Section):
    stall_timeout_s: float = 600.0
    kill_grace_s: float = 5.0
    log_max_bytes: int = 1048576
    log_keep: int = 5

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "stall_timeout_s": _POSITIVE,
        "kill_grace_s": _NON_NEGATIVE,
        "log_max_bytes": _AT_LEAST_ONE,
        "log_keep": _NON_NEGATIVE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class StdinConfig(_Section):
    ack_on: AckOn = "turn"
    restart_backoff_initial_s: float = 1.0
    restart_backoff_max_s: float = 60.0
    stall_timeout_s: float = 600.0

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "restart_backoff_initial_s": _NON_NEGATIVE,
        "restart_backoff_max_s": _NON_NEGATIVE,
        "stall_timeout_s": _POSITIVE,
    }
    _ordered: ClassVar[tuple[tuple[str, str], ...]] = (
        ("restart_backoff_initial_s", "restart_backoff_max_s"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TmuxConfig(_Section):
    verify_timeout_s: float = 3.0
    enter_retries: int = 3
    paste_settle_s: float = 0.15

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "verify_timeout_s": _POSITIVE,
        "enter_retries": _NON_NEGATIVE,
        "paste_settle_s": _NON_NEGATIVE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class HooksConfig(_Section):
    post_tool_use_debounce_s: float = 30.0
    output_max_chars: int = 10000
    stop_block_max: int = 0  # 0: Stop never blocks to deliver mail

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "post_tool_use_debounce_s": _NON_NEGATIVE,
        "output_max_chars": _AT_LEAST_ONE,
        "stop_block_max": _NON_NEGATIVE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig(_Section):
    level: LogLevel = "info"
    format: LogFormat = "auto"  # auto: JSON when stderr is not a TTY, else console
    file: Path | None = None  # None: stderr


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    store: StoreConfig = field(default_factory=StoreConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    spawn: SpawnConfig = field(default_factory=SpawnConfig)
    stdin: StdinConfig = field(default_factory=StdinConfig)
    tmux: TmuxConfig = field(default_factory=TmuxConfig)
    hooks: HooksConfig = field(default_factory=HooksConfig)
    log: LogConfig = field(default_factory=LogConfig)
    # The file the settings came from (SIGHUP reloads it); not part of equality.
    source: Path | None = field(default=None, compare=False)

    @classmethod
    def defaults(cls) -> Config:
        return cls()


# TOML section -> (Config attribute, section class). The one table the loader walks.
_SECTIONS: dict[str, tuple[str, type[_Section]]] = {
    "store": ("store", StoreConfig),
    "limits": ("limits", LimitsConfig),
    "daemon": ("daemon", DaemonConfig),
    "channels.spawn": ("spawn", SpawnConfig),
    "channels.stdin": ("stdin", StdinConfig),
    "channels.tmux": ("tmux", TmuxConfig),
    "hooks": ("hooks", HooksConfig),
    "log": ("log", LogConfig),
}


def _section_name(cls: type[_Section]) -> str:
    return next(name for name, (_, klass) in _SECTIONS.items() if klass is cls)


def env_var(section: str, key: str) -> str:
    """``env_var("channels.spawn", "kill_grace_s") == "AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S"``"""
    return f"{ENV_PREFIX}{section.replace('.', '_').upper()}_{key.upper()}"


def config_keys() -> list[tuple[str, str, str]]:
    """Every ``(section, key, environment variable)``, in file order."""
    return [
        (section, key, env_var(section, key))
        for section, (_, cls) in _SECTIONS.items()
        for key in _specs(cls)
    ]


# ---- field kinds: what a TOML value or an environment string must look like ----------------


class _Spec(NamedTuple):
    kind: str  # int | float | bool | choice | path
    choices: tuple[str, ...] = ()


_SPECS: dict[type, dict[str, _Spec]] = {}


def _specs(cls: type[_Section]) -> dict[str, _Spec]:
    if cls not in _SPECS:  # resolved on first use: get_type_hints is not free at import
        hints = get_type_hints(cls)
        _SPECS[cls] = {f.name: _spec_of(hints[f.name]) for f in fields(cls)}  # type: ignore[arg-type]
    return _SPECS[cls]


def _spec_of(hint: object) -> _Spec:
    if get_origin(hint) is Literal:
        return _Spec("choice", tuple(get_args(hint)))
    if isinstance(hint, type) and hint in (int, float, bool):
        return _Spec(hint.__name__)
    if Path in get_args(hint):
        return _Spec("path")
    raise TypeError(f"no config kind for {hint!r}")  # a programming error, not a user's


def _problem(cls: type[_Section], key: str, value: object) -> str | None:
    spec = _specs(cls)[key]
    if spec.kind == "choice" and value not in spec.choices:
        return f"expected one of {', '.join(map(repr, spec.choices))}, got {value!r}"
    bound = cls._bounds.get(key)
    if bound is not None and isinstance(value, int | float) and not bound.admits(value):
        return f"must be {bound}, got {value!r}"
    return None


_TYPES: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "int": ("an integer", int),
    "float": ("a number", (int, float)),
    "bool": ("true or false", bool),
    "choice": ("a string", str),
    "path": ("a non-empty path string", str),
}
_WORDS = {"1": True, "true": True, "yes": True, "on": True,
          "0": False, "false": False, "no": False, "off": False}  # fmt: skip


def _from_env(kind: str, text: str) -> object:
    """Read an environment string as the TOML value it stands for; junk stays a string."""
    word = text.strip()
    try:
        if kind == "int":
            return int(word)
        if kind == "float":
            return float(word)
    except ValueError:
        return text
    if kind == "bool":
        return _WORDS.get(word.lower(), text)
    if kind == "path":
        return text or None  # empty: back to the default
    return word


class _WrongType(Exception):
    """A value of the wrong type; the message says what was expected."""


def _coerce(kind: str, value: object, base: Path | None) -> object:
    """Check a value's type the way TOML spells it, then normalise it."""
    if value is None and kind == "path":
        return None
    expected, types = _TYPES[kind]
    # bool is an int subclass: `true` must not pass for a number, nor 1 for a bool.
    if not isinstance(value, types) or isinstance(value, bool) != (kind == "bool"):
        raise _WrongType(expected)
    if kind == "path" and not value:
        raise _WrongType(expected)
    if kind == "float":
        return float(value)  # type: ignore[arg-type]
    if kind == "choice":
        return str(value).lower()
    if kind == "path":
        path = Path(str(value)).expanduser()
        # Relative paths in a file mean "next to this file", whatever the daemon's cwd is.
        return path if base is None or path.is_absolute() else base / path
    return value


# ---- loading ---------------------------------------------------------------------------------


def find_config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """``$AGENTMAILD_CONFIG`` (must exist), else ``$XDG_CONFIG_HOME/agentmaild/config.toml``
    if it exists (``XDG_CONFIG_HOME`` defaults to ``~/.config``), else None."""
    env = os.environ if env is None else env
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    xdg = env.get("XDG_CONFIG_HOME", "")
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    base = Path(xdg) if Path(xdg).is_absolute() else home / ".config"  # XDG: relative is ignored
    candidate = base / "agentmaild" / "config.toml"
    return candidate if candidate.is_file() else None


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Build the Config once: defaults < file (``path``, else :func:`find_config_path`) < env."""
    env = os.environ if env is None else env
    source = find_config_path(env) if path is None else path
    values: dict[str, dict[str, Any]] = {section: {} for section in _SECTIONS}
    if source is not None:
        _apply_file(source, values)
    _apply_env(env, values)
    sections = {attr: cls(**values[name]) for name, (attr, cls) in _SECTIONS.items()}
    return Config(**sections, source=source)  # type: ignore[arg-type]


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib  # deferred: see the module docstring

    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line N, column M)"
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 ({exc.reason})") from exc


def _tables(doc: dict[str, Any], path: Path) -> list[tuple[str, Any]]:
    """Flatten ``[channels.*]`` so every section has one dotted name."""
    tables: list[tuple[str, Any]] = []
    for name, table in doc.items():
        if name != "channels":
            tables.append((name, table))
        elif not isinstance(table, dict):
            raise ConfigError(f"channels: expected a table, got {table!r} (in {path})")
        else:
            tables.extend((f"channels.{sub}", subtable) for sub, subtable in table.items())
    return tables


def _apply_file(path: Path, values: dict[str, dict[str, Any]]) -> None:
    base = path.parent.absolute()
    for section, table in _tables(_read_toml(path), path):
        if section not in _SECTIONS:
            raise ConfigError(
                f"unknown section [{section}]{_did_you_mean(section, _SECTIONS)} (in {path})"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: expected a table, got {table!r} (in {path})")
        cls = _SECTIONS[section][1]
        for key, raw in table.items():
            if key not in _specs(cls):
                hint = _did_you_mean(key, _specs(cls))
                raise ConfigError(f"{section}.{key}: unknown key{hint} (in {path})")
            values[section][key] = _convert(cls, section, key, raw, base, f"in {path}")


def _apply_env(env: Mapping[str, str], values: dict[str, dict[str, Any]]) -> None:
    # Look up the names we know rather than scanning the environment: other AGENTMAILD_*
    # variables exist (AGENTMAILD_CONFIG, ones the CLI reads), so a name matching no key is
    # ignored, not an error — which also means a misspelt override is silently ignored.
    for section, key, name in config_keys():
        if name in env:
            cls = _SECTIONS[section][1]
            raw = _from_env(_specs(cls)[key].kind, env[name])
            values[section][key] = _convert(cls, section, key, raw, None, f"from {name}")


def _convert(
    cls: type[_Section],
    section: str,
    key: str,
    raw: object,
    base: Path | None,
    origin: str,
) -> Any:
    try:
        value = _coerce(_specs(cls)[key].kind, raw, base)
    except _WrongType as exc:
        raise ConfigError(f"{section}.{key}: expected {exc}, got {raw!r} ({origin})") from None
    problem = _problem(cls, key, value)
    if problem is not None:
        raise ConfigError(f"{section}.{key}: {problem} ({origin})")
    return value


def _did_you_mean(word: str, candidates: Mapping[str, object]) -> str:
    import difflib  # only on the error path

    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
