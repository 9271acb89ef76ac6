"""Configuration: frozen dataclasses built once from a TOML file plus ``AGENTMAILD_*`` overrides.

Precedence, lowest first: built-in defaults, the TOML file, ``AGENTMAILD_<SECTION>_<KEY>``
environment variables (``AGENTMAILD_CHANNELS_SPAWN_STALL_TIMEOUT_S=5``). Unknown keys, unknown
``AGENTMAILD_*`` variables and wrong types are errors, and every error is a ConfigError naming the
key (``limits.body_max_bytes``) or variable and where the value came from.

Owns: ``sections`` (the dataclasses and their bounds), ``fields`` (what the sections share: bounds,
field kinds, value checks) and ``load`` (file, environment, checks).
May import: the standard library and ``errors`` only; everything else imports it. The hook's hot
path never loads it (it reads its few ``AGENTMAILD_HOOKS_*`` variables itself).
"""

from __future__ import annotations

from agentmaild.config.delivery import DeliveryConfig
from agentmaild.config.load import (
    CONFIG_ENV,
    ENV_PREFIX,
    config_keys,
    env_var,
    find_config_path,
    load_config,
)
from agentmaild.config.sections import (
    TEAM_RULES,
    Config,
    DaemonConfig,
    HooksConfig,
    HttpConfig,
    LimitsConfig,
    LogConfig,
    SpawnConfig,
    StdinConfig,
    StoreConfig,
    TmuxConfig,
    team_limits,
    team_values,
)

__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "TEAM_RULES",
    "Config",
    "DaemonConfig",
    "DeliveryConfig",
    "HooksConfig",
    "HttpConfig",
    "LimitsConfig",
    "LogConfig",
    "SpawnConfig",
    "StdinConfig",
    "StoreConfig",
    "TmuxConfig",
    "config_keys",
    "env_var",
    "find_config_path",
    "load_config",
    "team_limits",
    "team_values",
]
