"""Identifiers and timestamps: time-ordered ``msg-``/``dlv-`` ids, Overstory's ISO ``Z`` stamps."""

from __future__ import annotations

import _thread
import os
import re
import time

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
_lock = _thread.allocate_lock()  # not `threading`: the hook path must import little
_last_ms = 0
_seq = 0

# What an id may look like when it comes from outside (CLI, socket, hook): never a path.
ID_RE = re.compile(r"^(msg|dlv|bc)-[a-z0-9]{6,40}$")


def _b36(n: int, width: int) -> str:
    """The last ``width`` base36 digits of ``n``, zero-padded."""
    n %= 36**width
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = _ALPHABET[r] + out
    return out.rjust(width, "0")


_prefix_ms = -1
_prefix = ""


def new_id(prefix: str) -> str:
    """``prefix-`` + 9 base36 chars of milliseconds + 3 of a per-ms sequence + 6 random chars.

    Sortable by creation time within a process and unique across processes; only [a-z0-9].
    """
    global _last_ms, _seq, _prefix_ms, _prefix
    with _lock:
        ms = int(time.time() * 1000)
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
        else:
            _last_ms, _seq = ms, 0
        seq = _seq
        if ms != _prefix_ms:  # the time part changes once a millisecond: computed once
            _prefix_ms, _prefix = ms, _b36(ms, 9)
        stamp = _prefix
    rand = "".join(_ALPHABET[b % 36] for b in os.urandom(6))
    return f"{prefix}-{stamp}{_b36(seq, 3)}{rand}"


_last_stamp: tuple[float, str] = (-1.0, "")


def iso_now(now: float | None = None) -> str:
    """UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ``, the format Overstory writes with ``toISOString()``."""
    global _last_stamp
    t = time.time() if now is None else now
    last = _last_stamp  # one send asks twice for the same instant (its rows and its nudge)
    if last[0] == t:
        return last[1]
    ms = int(t * 1000) % 1000
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{ms:03d}Z"
    _last_stamp = (t, stamp)
    return stamp


def check_message_id(value: str) -> str:
    """Reject anything that is not a well-formed message id (path-like, control chars, ...)."""
    if not isinstance(value, str) or not _OUTSIDE_ID_RE.fullmatch(value):
        from agentmaild.errors import ValidationError

        shown = repr(value[:80]) + ("…" if len(value) > 80 else "")
        raise ValidationError(f"invalid message id {shown}: expected msg-<letters and digits>")
    return value


# Overstory writes ``msg-`` + 12 random [a-z0-9]; ours are 18. Accept both, nothing path-like.
_OUTSIDE_ID_RE = re.compile(r"^msg-[a-z0-9]{1,64}$")


NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def check_name(name: str, what: str = "agent name", *, loose: bool = False) -> str:
    """Agent names: 1-64 of ``[a-z0-9._-]``, starting with a letter or digit (never a path).

    ``loose`` (Overstory mode) also takes the names Overstory accepts, e.g. ``Lead``, ``Builder 1``.
    """
    if loose:
        from agentmaild.overstory.flavor import check_loose_name

        return check_loose_name(name, what)

    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        from agentmaild.errors import ValidationError  # here, not above: every send checks a name

        raise ValidationError(
            f"invalid {what} {str(name)[:80]!r}: "
            "use 1-64 of a-z 0-9 . _ - starting with a letter or digit"
        )
    return name


HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def check_host(host: str) -> str:
    """A host name as ``serve --host`` and ``agents add --host`` take it (a hostname's letters)."""
    from agentmaild.errors import ValidationError

    if not HOST_RE.fullmatch(host):
        raise ValidationError(
            f"invalid host {host[:80]!r}: use 1-253 of A-Z a-z 0-9 . _ - starting with a letter "
            "or digit"
        )
    return host
