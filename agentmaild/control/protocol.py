"""The control wire format: versioned newline-delimited JSON, one request and one reply each.

Request:  ``{"v": 1, "cmd": "<name>", "args": {...}}\\n``
Reply:    ``{"v": 1, "ok": true, "result": {...}}\\n``
      or  ``{"v": 1, "ok": false, "error": {"code": "...", "message": "..."}}\\n``

Kept light on purpose (stdlib json/os/pathlib only, no anyio): the synchronous client imports it on
the CLI's ``send`` path, which must stay a few milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

from agentmaild.errors import ControlError, ProtocolError, ValidationError
from agentmaild.store.location import StoreLocation

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 64 * 1024
"""Longest request line the daemon reads, newline excluded."""
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Longest reply line a client accepts (``status`` and ``metrics`` can be long)."""
READ_TIMEOUT_S = 2.0
"""How long the daemon waits for a whole request line before closing the connection."""
FIRST_BYTE_TIMEOUT_S = 0.2
"""How long the daemon keeps a connection that has sent nothing yet (our client sends at once)."""

COMMANDS: tuple[str, ...] = (
    "ping",
    "status",
    "agents",
    "wake",
    "pause",
    "resume",
    "retry",
    "drain",
    "reload",
    "shutdown",
    "metrics",
    "await_reply",
    "interrupt",
)

SOCKET_NAME = "agentmaild.sock"
# sun_path is 108 bytes on Linux and 104 on the BSDs/macOS, both including the trailing NUL.
MAX_SOCKET_PATH_BYTES = 103 if sys.platform == "darwin" else 107
# The daemon binds siblings of its control socket, named by a suffix (the wake socket ".wake", the
# MCP socket ".mcp"): the control socket's path leaves room for the longest of them.
SIBLING_SUFFIX_BYTES = len(".wake")

_REQUEST_FIELDS = frozenset({"v", "cmd", "args"})


class Request(NamedTuple):
    """A decoded, well-formed request; ``cmd`` is not yet checked against ``COMMANDS``."""

    cmd: str
    args: dict[str, Any]


def seconds_arg(args: dict[str, Any], key: str, default: float) -> float:
    """``args[key]`` (else ``default``) as seconds: a finite number >= 0, never a boolean.

    One rule for the CLI (``ctl drain timeout_s=…``, checked before anything is sent) and the
    daemon (which checks again: other clients speak the protocol too)."""
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e300:
        shown = json.dumps(value, default=str)[:40]
        raise ValidationError(f"{key}: expected a non-negative number of seconds, got {shown}")
    return float(value)


def encode_request(cmd: str, args: dict[str, Any] | None = None) -> bytes:
    """One request line, newline included; ``ProtocolError`` when it cannot be sent as is."""
    if not isinstance(cmd, str) or not cmd:
        raise ProtocolError("the command must be a non-empty string")
    line = _dumps({"v": PROTOCOL_VERSION, "cmd": cmd, "args": {} if args is None else args})
    if len(line) - 1 > MAX_REQUEST_BYTES:
        raise ProtocolError(f"request too large ({len(line) - 1} bytes; limit {MAX_REQUEST_BYTES})")
    return line


def decode_request(line: bytes) -> Request:
    """Parse one request line (trailing newline optional); ``ProtocolError`` says what is wrong."""
    if len(line.rstrip(b"\r\n")) > MAX_REQUEST_BYTES:
        raise ProtocolError(f"request too large (limit {MAX_REQUEST_BYTES} bytes)")
    obj = _loads(line, "request")
    _check_version(obj)
    unknown = obj.keys() - _REQUEST_FIELDS
    if unknown:
        raise ProtocolError(f"unknown request field(s): {', '.join(sorted(map(repr, unknown)))}")
    cmd = obj.get("cmd")
    if not isinstance(cmd, str) or not cmd:
        raise ProtocolError("request field 'cmd' must be a non-empty string")
    args = obj.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError(f"request field 'args' must be an object, not {_json_type(args)}")
    return Request(cmd, args)


def encode_response(result: dict[str, Any]) -> bytes:
    """A success reply line; ``ProtocolError`` when the result is not a JSON object."""
    if not isinstance(result, dict):
        raise ProtocolError(f"a result must be an object, not {type(result).__name__}")
    return _dumps({"v": PROTOCOL_VERSION, "ok": True, "result": result})


def encode_error(code: str, message: str) -> bytes:
    """An error reply line."""
    return _dumps({"v": PROTOCOL_VERSION, "ok": False, "error": {"code": code, "message": message}})


def decode_response(line: bytes) -> dict[str, Any]:
    """The ``result`` of a reply line.

    An error reply raises ``ProtocolError`` when its code is ``protocol`` and otherwise a
    ``ControlError`` whose ``code`` is the daemon's code (``unknown_command``, ``not_found``...).
    A malformed reply raises ``ProtocolError``.
    """
    obj = _loads(line, "reply")
    _check_version(obj)
    ok = obj.get("ok")
    if ok is True:
        result = obj.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"reply field 'result' must be an object, not {_json_type(result)}")
        return result
    if ok is not False:
        raise ProtocolError("reply field 'ok' must be true or false")
    raise _remote_error(obj.get("error"))


def socket_path_for(store: Path | StoreLocation, configured: Path | None = None) -> Path:
    """Where the daemon serving ``store`` (a location, or a store file) listens; the daemon and
    every client call this. ``configured``: ``[daemon] socket``, which wins when set.

    Beside the store's local path (a server store's stand-in: ``StoreLocation.local_path``)
    when that fits in ``sun_path``; otherwise
    ``$XDG_RUNTIME_DIR/agentmaild-<hash>.sock``, or ``/tmp/agentmaild-<uid>/agentmaild-<hash>.sock``
    (the server creates that directory 0700). The path is resolved first so that a relative and an
    absolute spelling of one store agree.
    """
    if configured:
        return Path(configured)
    local = store.local_path if isinstance(store, StoreLocation) else store
    db = local.expanduser().resolve()
    beside = db.parent / SOCKET_NAME
    if _fits(beside):
        return beside
    # Imported here: hashlib loads OpenSSL, and the common, short-path case never needs it.
    import hashlib

    name = f"agentmaild-{hashlib.sha256(os.fsencode(db)).hexdigest()[:16]}.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and _fits(Path(runtime) / name):
        return Path(runtime) / name
    return fallback_dir() / name


def fallback_dir() -> Path:
    """The per-user directory under /tmp used when neither the store dir nor XDG_RUNTIME_DIR fit."""
    # A fixed /tmp (not $TMPDIR): a daemon under systemd/launchd and a CLI in a shell must agree.
    # The server creates it 0700 and refuses it when another user owns it.
    return Path("/tmp") / f"agentmaild-{os.getuid()}"


def _fits(path: Path) -> bool:
    return len(os.fsencode(path)) + SIBLING_SUFFIX_BYTES <= MAX_SOCKET_PATH_BYTES


def _dumps(obj: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"not JSON-serializable: {exc}") from exc
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate (quoted agent output in a status reply): spelled out, so the other
        # side's strict parser still takes the line.
        return _dumps(_storable(obj))


def _storable(value: Any) -> Any:
    from agentmaild.mail.jsoninput import storable

    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    return [_storable(v) for v in value] if isinstance(value, list | tuple) else value


def _loads(line: bytes, what: str) -> dict[str, Any]:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{what} is not valid UTF-8 (byte {exc.start})") from exc
    from agentmaild.mail.jsoninput import JsonInputError, loads_strict

    try:
        # Strict: no NaN/Infinity/1e999, no digit-limit integers, bounded nesting, no lone
        # surrogates, so nothing in a request can fail later when it is stored or printed.
        obj = loads_strict(text)
    except JsonInputError as exc:
        raise ProtocolError(f"{what} is not valid JSON: {exc.message}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} must be a JSON object, not {_json_type(obj)}")
    return obj


def _check_version(obj: dict[str, Any]) -> None:
    if "v" not in obj:
        raise ProtocolError("missing protocol version field 'v'")
    v = obj["v"]
    # bool is an int subclass; `true` must not pass for version 1.
    if type(v) is not int or v != PROTOCOL_VERSION:
        raise ProtocolError(
            f"unsupported protocol version {v!r} (this side speaks v{PROTOCOL_VERSION})"
        )


def _remote_error(error: object) -> ControlError:
    if not isinstance(error, dict):
        return ProtocolError("error reply without an 'error' object")
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, str) or not isinstance(message, str):
        return ProtocolError("error reply needs string 'code' and 'message'")
    if code == ProtocolError.code:
        return ProtocolError(message)
    exc = ControlError(message)
    exc.code = code
    return exc


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__
