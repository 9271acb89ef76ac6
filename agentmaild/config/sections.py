"""The configuration's shape: one frozen dataclass per TOML section, their bounds, and ``Config``.

What every section shares (bounds, field kinds, the checks) is ``fields``. Only the standard
library: the CLI loads this on every command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentmaild.config.delivery import DeliveryConfig
from agentmaild.config.fields import (
    AT_LEAST_ONE,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    SECTION_NAMES,
    Bound,
    Section,
    host_port_problem,
)
from agentmaild.errors import ConfigError

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LogFormat = Literal["auto", "json", "console"]
AckOn = Literal["turn", "write"]
StoreFlavor = Literal["auto", "agentmail", "overstory"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConfig(Section):
    # A file, or a postgresql:// DSN. None: the project default, <project root>/.agentmail/mail.db
    db: Path | str | None = None
    attempts_keep_days: float = 30.0  # delivery history kept; `purge` and the daemon prune it
    # "overstory": Overstory mode (its registry, banners, names, identity); "auto": when the store
    # is .overstory/mail.db.
    flavor: StoreFlavor = "auto"
    # A server store's daemon: its connection pool, so that many store calls
    # (claims, acks, sends of several agents) run at once; 1 = one connection, one call at a time.
    pg_pool_size: int = 4

    _bounds: ClassVar[Mapping[str, Bound]] = {
        "attempts_keep_days": POSITIVE, "pg_pool_size": AT_LEAST_ONE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitsConfig(Section):
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
    agent_budget_usd: float = 0.0  # an agent's daily budget (UTC day) unless its own; 0: none
    interrupt_max: int = 5  # interrupts between two agents per window, then refused
    interrupt_window_s: float = 600.0

    _bounds: ClassVar[Mapping[str, Bound]] = {
        "subject_max_chars": AT_LEAST_ONE,
        "body_max_bytes": AT_LEAST_ONE,
        "payload_max_bytes": AT_LEAST_ONE,
        "unread_max": AT_LEAST_ONE,
        "rate_limit_max": NON_NEGATIVE, "rate_limit_window_s": POSITIVE,
        "duplicate_window_s": NON_NEGATIVE,
        "pingpong_max": NON_NEGATIVE, "pingpong_window_s": POSITIVE,
        "unread_escalate_after_urgent_s": NON_NEGATIVE,
        "unread_escalate_after_high_s": NON_NEGATIVE,
        "unread_escalate_after_normal_s": NON_NEGATIVE,
        "unread_escalate_after_low_s": NON_NEGATIVE,
        "unread_escalate_interval_s": POSITIVE,
        "agent_budget_usd": NON_NEGATIVE,
        "interrupt_max": NON_NEGATIVE, "interrupt_window_s": POSITIVE,
    }


# The [limits] keys that protect the team (README "Team rules"): a send is judged by the store's
# values (``MailStore.team_rules``, written by its daemon), else the defaults; never the sender's.
# ``refuse_unknown_recipients`` is the caller's own; ``unread_escalate_*`` only the daemon reads.
TEAM_RULES = ("subject_max_chars", "body_max_bytes", "payload_max_bytes", "unread_max",
              "rate_limit_max", "rate_limit_window_s", "duplicate_window_s", "pingpong_max",
              "pingpong_window_s", "agent_budget_usd", "interrupt_max",
              "interrupt_window_s")  # fmt: skip
_TEAM_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(LimitsConfig)
                                  if f.name in TEAM_RULES}  # fmt: skip
_MERGED: dict[object, LimitsConfig] = {}  # team_limits' answers (a handful per process)


def team_values(limits: LimitsConfig) -> dict[str, int | float]:
    """The team rules of ``limits``, as the store keeps them."""
    return {key: getattr(limits, key) for key in TEAM_RULES}


def team_limits(stored: Mapping[str, object], own: LimitsConfig | None = None) -> LimitsConfig:
    """``own`` (the caller's [limits], default: built-in) with every team rule replaced by the
    store's value (``stored``), else by the built-in default (asked on every send: answers kept)."""
    rules = dict(_TEAM_DEFAULTS)
    rules.update((k, v) for k, v in stored.items()
                 if k in rules and isinstance(v, int | float) and not isinstance(v, bool))
    key = (own, tuple(rules.values()))
    if key not in _MERGED:
        try:
            _MERGED[key] = replace(own or LimitsConfig(), **rules)
        except ConfigError as exc:
            raise ConfigError(f"the store's team rules: {exc.message}") from None
    return _MERGED[key]


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonConfig(Section):
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
    _bounds: ClassVar[Mapping[str, Bound]] = {
        "poll_interval_s": POSITIVE,
        "lease_s": POSITIVE,
        "batch_max_messages": AT_LEAST_ONE,
        "batch_max_chars": AT_LEAST_ONE,
        "max_attempts": AT_LEAST_ONE,
        "backoff_initial_s": NON_NEGATIVE,
        "backoff_max_s": NON_NEGATIVE,
        "backoff_jitter": FRACTION,
        "shutdown_grace_s": NON_NEGATIVE,
        "checkpoint_interval_s": POSITIVE,
        "wal_checkpoint_pages": NON_NEGATIVE,
        "busy_warn_after_s": POSITIVE,
    }
    _ordered: ClassVar[tuple[tuple[str, str], ...]] = (("backoff_initial_s", "backoff_max_s"),)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnConfig(Section):
    stall_timeout_s: float = 600.0
    kill_grace_s: float = 5.0
    log_max_bytes: int = 1048576
    log_keep: int = 5

    _bounds: ClassVar[Mapping[str, Bound]] = {
        "stall_timeout_s": POSITIVE,
        "kill_grace_s": NON_NEGATIVE,
        "log_max_bytes": AT_LEAST_ONE,
        "log_keep": NON_NEGATIVE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class StdinConfig(Section):
    ack_on: AckOn = "turn"
    restart_backoff_initial_s: float = 1.0
    restart_backoff_max_s: float = 60.0
    stall_timeout_s: float = 600.0

    _bounds: ClassVar[Mapping[str, Bound]] = {
        "restart_backoff_initial_s": NON_NEGATIVE,
        "restart_backoff_max_s": NON_NEGATIVE,
        "stall_timeout_s": POSITIVE,
    }
    _ordered: ClassVar[tuple[tuple[str, str], ...]] = (
        ("restart_backoff_initial_s", "restart_backoff_max_s"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TmuxConfig(Section):
    verify_timeout_s: float = 3.0
    enter_retries: int = 3
    paste_settle_s: float = 0.15

    _bounds: ClassVar[Mapping[str, Bound]] = {
        "verify_timeout_s": POSITIVE,
        "enter_retries": NON_NEGATIVE,
        "paste_settle_s": NON_NEGATIVE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class HooksConfig(Section):
    post_tool_use_debounce_s: float = 30.0
    output_max_chars: int = 10000
    stop_block_max: int = 0  # 0: Stop never blocks to deliver mail

    _bounds: ClassVar[Mapping[str, Bound]] = {
        "post_tool_use_debounce_s": NON_NEGATIVE,
        "output_max_chars": AT_LEAST_ONE,
        "stop_block_max": NON_NEGATIVE,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConfig(Section):
    listen: str = ""  # "HOST:PORT" serves the HTTP API (agentmaild.http); "" = off
    require_tokens: bool = True  # false: loopback callers act without a token (loopback only)
    max_body_bytes: int = 262144  # a larger request body is refused (413) before it is read
    request_timeout_s: float = 10.0  # a request not fully received by then is refused (408)
    relay_window_s: float = 300.0  # POST /v1/relay: a signed envelope older than this is refused
    relay_skew_s: float = 30.0  # … and one dated further ahead than this (the peers' clocks)

    _bounds: ClassVar[Mapping[str, Bound]] = {
        "max_body_bytes": AT_LEAST_ONE,
        "request_timeout_s": POSITIVE,
        "relay_window_s": POSITIVE,
        "relay_skew_s": POSITIVE,
    }

    _checks: ClassVar[Mapping[str, Callable[[object], str | None]]] = {
        "listen": lambda v: host_port_problem(str(v)),
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


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig(Section):
    level: LogLevel = "info"
    format: LogFormat = "auto"  # auto: JSON when stderr is not a TTY, else console
    file: Path | None = None  # None: stderr


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    store: StoreConfig = field(default_factory=StoreConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    delivery: DeliveryConfig = field(default_factory=DeliveryConfig)
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
_SECTIONS: dict[str, tuple[str, type[Section]]] = {
    "store": ("store", StoreConfig),
    "limits": ("limits", LimitsConfig),
    "daemon": ("daemon", DaemonConfig),
    "delivery": ("delivery", DeliveryConfig),
    "channels.spawn": ("spawn", SpawnConfig),
    "channels.stdin": ("stdin", StdinConfig),
    "channels.tmux": ("tmux", TmuxConfig),
    "hooks": ("hooks", HooksConfig),
    "http": ("http", HttpConfig),
    "log": ("log", LogConfig),
}
SECTION_NAMES.update({klass: name for name, (_, klass) in _SECTIONS.items()})
