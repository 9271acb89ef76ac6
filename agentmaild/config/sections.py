"""The configuration's shape: one frozen dataclass per TOML section, their bounds, and ``Config``.

Only the standard library: the CLI loads this on every command.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar, Literal, NamedTuple, get_args, get_origin, get_type_hints

from agentmaild.errors import ConfigError

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LogFormat = Literal["auto", "json", "console"]
AckOn = Literal["turn", "write"]
StoreFlavor = Literal["auto", "agentmail", "overstory"]


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
    _checks: ClassVar[Mapping[str, Callable[[object], str | None]]] = {}  # a value's format

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
    # A file, or a postgresql:// DSN. None: the project default, <project root>/.agentmail/mail.db
    db: Path | str | None = None
    attempts_keep_days: float = 30.0  # delivery history kept; `purge` and the daemon prune it
    # "overstory": Overstory mode (its registry, banners, names, identity); "auto": when the store
    # is .overstory/mail.db.
    flavor: StoreFlavor = "auto"
    # A server store's daemon: its connection pool, so that many store calls
    # (claims, acks, sends of several agents) run at once; 1 = one connection, one call at a time.
    pg_pool_size: int = 4

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "attempts_keep_days": _POSITIVE, "pg_pool_size": _AT_LEAST_ONE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitsConfig(_Section):
    subject_max_chars: int = 256
    body_max_bytes: int = 65536
    payload_max_bytes: int = 16384
    unread_max: int = 10000
    rate_limit_max: int = 0  # 0: no rate limit
    rate_limit_window_s: float = 60.0
    refuse_unknown_recipients: bool = True
    # Team rules (agentmaild.rules); 0 turns a rule off.
    duplicate_window_s: float = 60.0  # identical mail (sender, to, subject, body) collapses
    pingpong_max: int = 40  # messages between two agents on one thread per window, then held
    pingpong_window_s: float = 600.0
    unread_escalate_after_urgent_s: float = 300.0  # unread this long → one escalation
    unread_escalate_after_high_s: float = 1800.0
    unread_escalate_after_normal_s: float = 0.0
    unread_escalate_after_low_s: float = 0.0
    unread_escalate_interval_s: float = 30.0  # how often the daemon looks (one store-wide query)

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "subject_max_chars": _AT_LEAST_ONE,
        "body_max_bytes": _AT_LEAST_ONE,
        "payload_max_bytes": _AT_LEAST_ONE,
        "unread_max": _AT_LEAST_ONE,
        "rate_limit_max": _NON_NEGATIVE,
        "rate_limit_window_s": _POSITIVE,
        "duplicate_window_s": _NON_NEGATIVE,
        "pingpong_max": _NON_NEGATIVE,
        "pingpong_window_s": _POSITIVE,
        "unread_escalate_after_urgent_s": _NON_NEGATIVE,
        "unread_escalate_after_high_s": _NON_NEGATIVE,
        "unread_escalate_after_normal_s": _NON_NEGATIVE,
        "unread_escalate_after_low_s": _NON_NEGATIVE,
        "unread_escalate_interval_s": _POSITIVE,
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
    busy_warn_after_s: float = 600.0
    quick_check: bool = True  # PRAGMA quick_check before serving; false skips it (huge stores)
    socket: Path | None = None  # None: beside the store (or under $XDG_RUNTIME_DIR)
    host: str = ""  # the host this daemon delivers for ("": this machine's hostname)
    # Each agent turn in a cgroup of its own where cgroup v2 allows (procs.cgroups); false:
    # process groups, sessions and the scope marker only.
    cgroups: bool = True

    _checks: ClassVar[Mapping[str, Callable[[object], str | None]]] = {
        "host": lambda v: _host_problem(str(v)),
    }
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
        "busy_warn_after_s": _POSITIVE,
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
class HttpConfig(_Section):
    listen: str = ""  # "HOST:PORT" serves the HTTP API (agentmaild.http); "" = off
    require_tokens: bool = True  # false: loopback callers act without a token (loopback only)
    max_body_bytes: int = 262144  # a larger request body is refused (413) before it is read
    request_timeout_s: float = 10.0  # a request not fully received by then is refused (408)
    relay_window_s: float = 300.0  # POST /v1/relay: a signed envelope older than this is refused
    relay_skew_s: float = 30.0  # … and one dated further ahead than this (the peers' clocks)

    _bounds: ClassVar[Mapping[str, _Bound]] = {
        "max_body_bytes": _AT_LEAST_ONE,
        "request_timeout_s": _POSITIVE,
        "relay_window_s": _POSITIVE,
        "relay_skew_s": _POSITIVE,
    }

    _checks: ClassVar[Mapping[str, Callable[[object], str | None]]] = {
        "listen": lambda v: _host_port_problem(str(v)),
    }


def _host_problem(host: str) -> str | None:
    from agentmaild.ids import HOST_RE

    if not host or HOST_RE.fullmatch(host):
        return None
    return f"expected a host name (A-Z a-z 0-9 . _ -), got {host!r}"


def daemon_host(config: DaemonConfig) -> str:
    """The host a daemon delivers for: ``[daemon] host``, else this machine's hostname."""
    import socket

    return config.host or socket.gethostname()


def _host_port_problem(listen: str) -> str | None:
    if not listen:
        return None
    host, sep, port = listen.rpartition(":")
    if sep and host and port.isdigit() and int(port) <= 65535:
        return None
    return f"expected HOST:PORT (e.g. 127.0.0.1:8025) or \"\", got {listen!r}"


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
    http: HttpConfig = field(default_factory=HttpConfig)
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
    "http": ("http", HttpConfig),
    "log": ("log", LogConfig),
}


def _section_name(cls: type[_Section]) -> str:
    return next(name for name, (_, klass) in _SECTIONS.items() if klass is cls)


# ---- field kinds: what a TOML value or an environment string must look like ----------------


class _Spec(NamedTuple):
    kind: str  # int | float | bool | str | choice | path
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
    if isinstance(hint, type) and hint in (int, float, bool, str):
        return _Spec(hint.__name__)
    if Path in get_args(hint):
        return _Spec("path")
    raise TypeError(f"no config kind for {hint!r}")  # a programming error, not a user's


def _problem(cls: type[_Section], key: str, value: object) -> str | None:
    spec = _specs(cls)[key]
    if spec.kind == "choice" and value not in spec.choices:
        return f"expected one of {', '.join(map(repr, spec.choices))}, got {value!r}"
    check = cls._checks.get(key)
    if check is not None and (problem := check(value)) is not None:
        return problem
    bound = cls._bounds.get(key)
    if bound is not None and isinstance(value, int | float) and not bound.admits(value):
        return f"must be {bound}, got {value!r}"
    return None
