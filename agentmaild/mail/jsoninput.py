"""Strict parsing of JSON that users and agents hand us: finite numbers, bounded size, real text.

Python's ``json.loads`` accepts what other tools reject or what breaks later: ``NaN``/``Infinity``
and ``1e999`` (a float ``inf`` that ``allow_nan=False`` refuses to write back), integers past
``sys.get_int_max_str_digits()`` (a ValueError), nesting deep enough for a RecursionError, and
``"\\ud800"`` (a lone surrogate that cannot be encoded when stored or printed). ``loads_strict``
turns each of those into one ``JsonInputError`` with a plain reason, so a boundary maps it once.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

MAX_DEPTH = 100  # arrays/objects inside each other; real payloads stay far below


class JsonInputError(ValueError):
    """Why a JSON text was refused; ``syntax`` is True when it is not JSON at all."""

    def __init__(self, message: str, *, syntax: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.syntax = syntax


def loads_strict(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``text``; raise JsonInputError for anything that would fail a later step."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except JsonInputError:
        raise
    except json.JSONDecodeError as exc:
        raise JsonInputError(f"not valid JSON ({exc.msg} at char {exc.pos})", syntax=True) from None
    except RecursionError:
        raise JsonInputError(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # bytes that are not UTF-8 (the digit limit is parse_int's)
        raise JsonInputError(f"not valid JSON ({exc})", syntax=True) from None
    check_tree(value, max_depth=max_depth)
    return value


def json_or_text(raw: str) -> Any:
    """A ``KEY=VALUE`` value: JSON when it parses, else the text itself; refused when broken.

    ``5`` is a number and ``abc`` a string, but ``1e999`` or a 5 000-deep array is an error,
    not a silent string, and text that cannot be stored (lone surrogates) is refused either way.
    """
    try:
        return loads_strict(raw)
    except JsonInputError as exc:
        if not exc.syntax:
            raise
    check_text(raw)
    return raw


def key_values(pairs: list[str], label: str) -> dict[str, Any]:
    """``KEY=VALUE`` words (``--setting``, ``ctl``'s arguments) as a dict, each value JSON when
    it parses as such (``json_or_text``); a word without ``=`` or a key, or a key or value
    refused here, is a ValidationError naming ``label`` and the word."""
    from agentmaild.errors import ValidationError, one_line

    got: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValidationError(f"{label} {pair!r}: expected KEY=VALUE")
        try:
            check_text(key)
            got[key] = json_or_text(raw)
        except JsonInputError as exc:
            raise ValidationError(f"{label} {one_line(key)}: {exc.message}") from None
    return got


def check_tree(value: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """Nesting within ``max_depth``; every string (keys too) encodable as UTF-8."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            check_text(item)
        elif isinstance(item, dict | list):
            if depth >= max_depth:
                raise JsonInputError(f"nested deeper than {max_depth} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(text[exc.start])
        raise JsonInputError(
            f"a string is not valid UTF-8 text (lone surrogate \\u{bad:04x})"
        ) from None


def storable(text: str) -> str:
    """``text`` with lone surrogates spelled ``\\udXXX``: what agent output may hold, made
    storable (SQLite, logs, a terminal) without losing the rest."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _constant(name: str) -> Any:
    raise JsonInputError(f"{name} is not valid JSON (numbers must be finite)")


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise JsonInputError(f"number {_clip(literal)} is out of range (numbers must be finite)")
    return value


def _int(literal: str) -> int:
    limit = sys.get_int_max_str_digits()
    if limit and len(literal.lstrip("-")) > limit:
        raise JsonInputError(f"integer {_clip(literal)} has more than {limit} digits")
    return int(literal)


def _clip(literal: str) -> str:
    if len(literal) <= 24:
        return literal
    return f"{literal[:12]}…{literal[-8:]} ({len(literal)} chars)"
