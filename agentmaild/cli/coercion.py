"""Typer's value coercion without pydantic for the plain cases.

Typer turns every option's value into its annotated type through a pydantic ``TypeAdapter``,
built when the value is first processed: loading pydantic and building the adapters cost a cold
command ~0.1 s, more than all the rest of its work. A command-line value is a string (or the
default), so for a ``str`` option it is already what pydantic would give, and a plain decimal
is an ``int`` either way. Those two cases are answered here; every other value (another type, a
parser, a range, anything unusual) goes to typer's own adapter, built only then, so its
conversions and its error messages stay typer's. Still one parser: click parses the command
line, this only shortcuts the conversion of what it parsed.
"""

from __future__ import annotations

from typing import Any

import typer.core
from typer._coercion import RuntimeParam, TypeDescriptor

_typer_build = typer.core.build_runtime_param


class _PlainParam(RuntimeParam):
    """A ``str``, ``int`` or ``bool`` value: itself, or a decimal's int; else typer's adapter."""

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        kind = self.annotation
        if type(value) is kind:
            return value
        if kind is int and type(value) is str and _decimal(value):
            return int(value)
        slow = _typer_build(_descriptor_of(self))
        return slow._coerce_value(value, param, ctx)


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
        descriptor.annotation in (str, int, bool)
        and descriptor.file_annotation is None
        and info.parser is None
        and not descriptor.is_path
        and info.min is None
        and info.max is None
    )


def build_runtime_param(descriptor: TypeDescriptor) -> RuntimeParam:
    """Typer's ``build_runtime_param``, answering the plain ``str``/``int`` cases itself."""
    if _plain(descriptor):
        return _PlainParam(parameter_info=descriptor.parameter_info,
                           annotation=descriptor.annotation)  # fmt: skip
    return _typer_build(descriptor)


typer.core.build_runtime_param = build_runtime_param  # type: ignore[assignment]
