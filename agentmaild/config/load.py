"""Loading the configuration: the TOML file, ``AGENTMAILD_*`` overrides, type checks and errors.

tomllib (~20 ms cold) and difflib are imported only when needed: the CLI's paths load this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentmaild.config.fields import Section, specs, value_problem
from agentmaild.config.sections import _SECTIONS, Config
from agentmaild.errors import ConfigError
from agentmaild.store.location import StoreLocation

ENV_PREFIX = "AGENTMAILD_"
CONFIG_ENV = "AGENTMAILD_CONFIG"


def env_var(section: str, key: str) -> str:
    """``env_var("channels.spawn", "kill_grace_s") == "AGENTMAILD_CHANNELS_SPAWN_KILL_GRACE_S"``"""
    return f"{ENV_PREFIX}{section.replace('.', '_').upper()}_{key.upper()}"


def config_keys() -> list[tuple[str, str, str]]:
    """Every ``(section, key, environment variable)``, in file order."""
    return [
        (section, key, env_var(section, key))
        for section, (_, cls) in _SECTIONS.items()
        for key in specs(cls)
    ]


_TYPES: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "int": ("an integer", int),
    "float": ("a number", (int, float)),
    "bool": ("true or false", bool),
    "str": ("a string", str),
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
    if kind == "path" and not StoreLocation.of(str(value)).is_file:
        return str(value)  # a server's store ([store] db): its target is not a file name
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
            if key not in specs(cls):
                hint = _did_you_mean(key, specs(cls))
                raise ConfigError(f"{section}.{key}: unknown key{hint} (in {path})")
            values[section][key] = _convert(cls, section, key, raw, base, f"in {path}")


# AGENTMAILD_* variables that are not config keys: the config file's path, and the knobs of this
# repository's test suite and scripts (so they may sit in a developer's environment).
OTHER_ENV = frozenset({
    CONFIG_ENV,
    "AGENTMAILD_CLAUDE_BIN",
    "AGENTMAILD_RELIABILITY_SEED",
    "AGENTMAILD_REGENERATE_EXAMPLES",
})  # fmt: skip


def _apply_env(env: Mapping[str, str], values: dict[str, dict[str, Any]]) -> None:
    given = sorted(n for n in env if n.startswith(ENV_PREFIX) and n not in OTHER_ENV)
    if not given:
        return  # the common case: no key's kind need be read (``specs``, ~3 ms cold)
    known = {name: (section, key) for section, key, name in config_keys()}
    for name in given:
        if name not in known:
            hint = _did_you_mean(name, {**known, **dict.fromkeys(OTHER_ENV)})
            raise ConfigError(f"{name}: unknown agentmaild environment variable{hint}")
        section, key = known[name]
        cls = _SECTIONS[section][1]
        raw = _from_env(specs(cls)[key].kind, env[name])
        values[section][key] = _convert(cls, section, key, raw, None, f"from {name}")


def _convert(
    cls: type[Section],
    section: str,
    key: str,
    raw: object,
    base: Path | None,
    origin: str,
) -> Any:
    try:
        value = _coerce(specs(cls)[key].kind, raw, base)
    except _WrongType as exc:
        raise ConfigError(f"{section}.{key}: expected {exc}, got {raw!r} ({origin})") from None
    problem = value_problem(cls, key, value)
    if problem is not None:
        raise ConfigError(f"{section}.{key}: {problem} ({origin})")
    return value


def _did_you_mean(word: str, candidates: Mapping[str, object]) -> str:
    import difflib  # only on the error path

    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
