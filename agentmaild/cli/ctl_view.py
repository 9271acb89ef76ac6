"""How ``ctl`` prints a daemon's answer without ``--json``: ``key: value`` lines, nested objects
indented, one ``- k=v …`` line per object in a list; ``-`` for nothing. (``--json`` prints the
answer as the daemon gave it.)"""

from __future__ import annotations

import json
from typing import Any


def _scalar(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list) and not any(isinstance(v, dict | list) for v in value):
        return ", ".join(_scalar(v) for v in value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _nested(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value)
    return isinstance(value, list) and any(isinstance(v, dict | list) for v in value)


def text_lines(value: Any, indent: str = "") -> list[str]:
    """The answer as lines of text."""
    if isinstance(value, dict):
        lines: list[str] = []
        for key, item in value.items():
            if _nested(item):
                lines += [f"{indent}{key}:", *text_lines(item, indent + "  ")]
            else:
                lines.append(f"{indent}{key}: {_scalar(item)}")
        return lines
    if isinstance(value, list):
        return [
            f"{indent}- " + "  ".join(f"{k}={_scalar(v)}" for k, v in item.items())
            if isinstance(item, dict)
            else f"{indent}- {_scalar(item)}"
            for item in value
        ]
    return [f"{indent}{_scalar(value)}"]
