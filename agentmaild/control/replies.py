"""The shape of the replies the CLI prints, checked before printing: a daemon of another version,
or anything else answering on the socket, gets one ``ProtocolError`` line, never a traceback.

Only what the CLI reads is required; extra keys pass (newer daemons add columns).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentmaild.errors import ProtocolError

_NUMBER = (int, float)
_DAEMON = {"pid": (int,), "uptime_s": _NUMBER, "version": (str,)}
_ROW = {
    "agent": (str,),
    "channel": (str,),
    "state": (str,),
    "unread": (int,),
    "in_flight": (int,),
    "dead_letters": (int,),
}
_ROW_OPTIONAL = {"loop": (str,), "backoff_s": _NUMBER, "last_delivery": (dict,)}
_LAST_DELIVERY = {"result": (str,), "at": (str,)}
_TOTALS = {"messages": (int,), "unread": (int,)}


def check_status(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` when it is a well-formed ``status`` reply; ``ProtocolError`` naming the field."""
    _require(result, "status", {"daemon": (dict,), "agents": (list,), "totals": (dict,)})
    _require(result["daemon"], "status.daemon", _DAEMON)
    _require(result["totals"], "status.totals", _TOTALS)
    for i, row in enumerate(result["agents"]):
        where = f"status.agents[{i}]"
        if not isinstance(row, dict):
            raise ProtocolError(f"malformed reply from the daemon: {where} is not an object")
        _require(row, where, _ROW)
        _optional(row, where, _ROW_OPTIONAL)
        if row.get("last_delivery") is not None:
            _require(row["last_delivery"], f"{where}.last_delivery", _LAST_DELIVERY)
    return result


def check_text(result: dict[str, Any], cmd: str) -> str:
    """The ``text`` of a ``metrics`` reply; ``ProtocolError`` when it is missing or not a string."""
    _require(result, cmd, {"text": (str,)})
    return str(result["text"])


def _require(obj: dict[str, Any], where: str, fields: Mapping[str, tuple[type, ...]]) -> None:
    for name, types in fields.items():
        if name not in obj:
            raise ProtocolError(f"malformed reply from the daemon: {where}.{name} is missing")
        _check(obj[name], f"{where}.{name}", types)


def _optional(obj: dict[str, Any], where: str, fields: Mapping[str, tuple[type, ...]]) -> None:
    for name, types in fields.items():
        if obj.get(name) is not None:
            _check(obj[name], f"{where}.{name}", types)


def _check(value: object, where: str, types: tuple[type, ...]) -> None:
    # bool is an int subclass: `true` is not a count.
    if isinstance(value, bool) or not isinstance(value, types):
        wanted = " or ".join(t.__name__ for t in types)
        raise ProtocolError(
            f"malformed reply from the daemon: {where} should be {wanted}, "
            f"not {type(value).__name__}"
        )
