"""Typer's value coercion without pydantic for the plain cases.

Typer turns every option's value into its annotated type through a pydantic ``TypeAdapter``,
built when the value is first processed: loading pydantic and building the adapters cost a cold
command ~0.1 s, more than all the rest of its work. A command-line value is a string (or the
default), so for a ``str`` option it already is what pydantic would give; a flag's ``bool`` and
a tuple of strings for a ``list[str]`` are as plain, and a decimal is an ``int`` either way.
Those cases are answered here; every other value (another type, a parser, a range, anything
unusual) goes to typer's own adapter, built only then, so its conversions and its error
messages stay typer's. Still one parser: click parses the command line, this only shortcuts
the conversion of what it parsed.
"""

from __future__ import annotations

from typing import Any

import typer.core
from typer._coercion import RuntimeParam, TypeDescriptor
from typer._coercion import build_runtime_param as _typer_build

_STRINGS = list[str]


class _PlainParam(RuntimeParam):
    """A ``str``, ``bool``, ``int`` or ``list[str]`` value: itself (a decimal's int, a tuple's
    list); anything else goes to typer's adapter."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        kind = self.annotation
        if type(value) is kind and (kind is not int or self._in_range(value)):
            return value
        if kind == _STRINGS and type(value) in (list, tuple) and _all_str(value):
            return list(value)
        if kind is int and type(value) is str and _decimal(value) and self._in_range(int(value)):
            return int(value)
        slow = _typer_build(_descriptor_of(self))
        return slow._coerce_value(value, param, ctx)

    def _in_range(self, number: int) -> bool:
        """Within the option's ``min``/``max``; outside, typer's adapter clamps or refuses."""
        low, high = self.parameter_info.min, self.parameter_info.max
        return (low is None or number >= low) and (high is None or number <= high)


def _all_str(values: list[Any] | tuple[Any, ...]) -> bool:
    return all(type(v) is str for v in values)


def _decimal(text: str) -> bool:
    digits = text[1:] if text[:1] in "+-" else text
    return 0 < len(digits) < 19 and digits.isascii() and digits.isdigit()


def _descriptor_of(plain: _PlainParam) -> TypeDescriptor:
    return TypeDescriptor(
        annotation=plain.annotation, parameter_info=plain.parameter_info, file_annotation=None
    )


def _plain(descriptor: TypeDescriptor) -> bool:
    info = descriptor.parameter_info
    return (
        (descriptor.annotation in (str, int, bool) or descriptor.annotation == _STRINGS)
        and descriptor.file_annotation is None
        and info.parser is None
        and not descriptor.is_path
        and (descriptor.annotation is int or (info.min is None and info.max is None))
    )


def build_runtime_param(descriptor: TypeDescriptor) -> RuntimeParam:
    """Typer's ``build_runtime_param``, answering the plain ``str``/``int`` cases itself."""
    if _plain(descriptor):
        return _PlainParam(parameter_info=descriptor.parameter_info,
                           annotation=descriptor.annotation)  # fmt: skip
    return _typer_build(descriptor)


typer.core.build_runtime_param = build_runtime_param  # type: ignore[attr-defined]
