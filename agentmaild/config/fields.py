"""What every configuration section shares: numeric bounds, field kinds and the value checks.

Only the standard library: the CLI loads this on every command. The sections themselves are
``sections``, which registers each class's TOML name in ``SECTION_NAMES``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import ClassVar, Literal, NamedTuple, get_args, get_origin, get_type_hints

from agentmaild.errors import ConfigError

# section class -> its TOML name (``channels.spawn``), filled in by ``sections``.
SECTION_NAMES: dict[type, str] = {}


def section_name(cls: type[Section]) -> str:
    return SECTION_NAMES[cls]


class Bound:
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


POSITIVE = Bound(0, strict=True)
NON_NEGATIVE = Bound(0)
AT_LEAST_ONE = Bound(1)
FRACTION = Bound(0, high=1)


class Section:
    """Validation shared by every section; the dataclass calls ``__post_init__``."""

    __slots__ = ()
    _bounds: ClassVar[Mapping[str, Bound]] = {}
    _ordered: ClassVar[tuple[tuple[str, str], ...]] = ()  # (a, b): a must not exceed b
    _checks: ClassVar[Mapping[str, Callable[[object], str | None]]] = {}  # a value's format

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if _is_default(value, f.default):
                continue  # a built-in default passes (test_config checks every one): reading
                # the kinds (``specs``) costs a cold command ~3 ms it need not pay for them
            problem = value_problem(type(self), f.name, value)
            if problem is not None:
                raise ConfigError(f"{section_name(type(self))}.{f.name}: {problem}")
        for low, high in self._ordered:
            if getattr(self, low) > getattr(self, high):
                section = section_name(type(self))
                raise ConfigError(
                    f"{section}.{low}: must not exceed {section}.{high} "
                    f"({getattr(self, low)!r} > {getattr(self, high)!r})"
                )


def _is_default(value: object, default: object) -> bool:
    return value is default or (type(value) is type(default) and value == default)


# ---- field kinds: what a TOML value or an environment string must look like ----------------


class Spec(NamedTuple):
    kind: str  # int | float | bool | str | choice | path
    choices: tuple[str, ...] = ()


SPECS_BY_CLASS: dict[type, dict[str, Spec]] = {}


def specs(cls: type[Section]) -> dict[str, Spec]:
    if cls not in SPECS_BY_CLASS:  # resolved on first use: get_type_hints is not free at import
        hints = get_type_hints(cls)
        SPECS_BY_CLASS[cls] = {f.name: _spec_of(hints[f.name]) for f in fields(cls)}  # type: ignore[arg-type]
    return SPECS_BY_CLASS[cls]


def _spec_of(hint: object) -> Spec:
    if get_origin(hint) is Literal:
        return Spec("choice", tuple(get_args(hint)))
    if isinstance(hint, type) and hint in (int, float, bool, str):
        return Spec(hint.__name__)
    if Path in get_args(hint):
        return Spec("path")
    raise TypeError(f"no config kind for {hint!r}")  # a programming error, not a user's


def value_problem(cls: type[Section], key: str, value: object) -> str | None:
    spec = specs(cls)[key]
    if spec.kind == "choice" and value not in spec.choices:
        return f"expected one of {', '.join(map(repr, spec.choices))}, got {value!r}"
    check = cls._checks.get(key)
    if check is not None and (problem := check(value)) is not None:
        return problem
    bound = cls._bounds.get(key)
    if bound is not None and isinstance(value, int | float) and not bound.admits(value):
        return f"must be {bound}, got {value!r}"
    return None


def host_port_problem(listen: str) -> str | None:
    """``[http] listen``: HOST:PORT, or "" (off)."""
    if not listen:
        return None
    host, sep, port = listen.rpartition(":")
    if sep and host and port.isdigit() and int(port) <= 65535:
        return None
    return f"expected HOST:PORT (e.g. 127.0.0.1:8025) or \"\", got {listen!r}"
