"""API tokens of the HTTP face: the stored record, minting, hashing and the rules a token obeys.

A token is ``amt_`` + 43 random URL-safe characters, shown once by ``tokens create``; the store
keeps only its SHA-256 (a random 256-bit secret needs no slow hash: there is nothing to guess).
A token acts as one agent (or, for ``operator``, as any agent and for ``@all``) within its scopes:
the API's ``read``, ``send`` and ``ack``, and the dashboard's own ``dashboard`` (see its pages and
live stream) and ``control`` (its pause, resume and retry buttons). The dashboard scopes are for
operator tokens only and open no ``/v1`` route, so the token ``agentmaild dashboard`` puts in a
URL can watch and steer delivery but never read, send or ack mail through the API.
Stdlib only: the CLI and the daemon both load it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Protocol

from agentmaild.errors import ValidationError

PREFIX = "amt_"
SCOPES = ("read", "send", "ack")  # the API's (/v1); a token made without --scope has these
DASHBOARD_SCOPES = ("dashboard", "control")  # the dashboard's: view; pause/resume/retry
ALL_SCOPES = SCOPES + DASHBOARD_SCOPES
OPERATOR_AGENT = "operator"  # = vocab.OPERATOR: its tokens act for every agent
_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class _Row(Protocol):
    """A store's row: its columns by name."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiToken:
    """One ``am_tokens`` row (never the secret itself)."""

    id: str
    agent: str
    scopes: tuple[str, ...]
    hash: str
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None

    @property
    def operator(self) -> bool:
        return self.agent == OPERATOR_AGENT

    def to_row(self) -> dict[str, object]:
        """The ``am_tokens`` columns, as both stores write them (scopes comma-separated)."""
        return {
            "id": self.id,
            "agent": self.agent,
            "scopes": ",".join(self.scopes),
            "hash": self.hash,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
        }

    @classmethod
    def from_row(cls, row: _Row) -> ApiToken:
        """A token from an ``am_tokens`` row of either store."""
        return cls(
            id=str(row["id"]),
            agent=str(row["agent"]),
            scopes=tuple(s for s in str(row["scopes"]).split(",") if s),
            hash=str(row["hash"]),
            created_at=float(row["created_at"]),
            expires_at=row["expires_at"],
            revoked_at=row["revoked_at"],
        )

    def usable(self, now: float) -> str | None:
        """Why the token no longer works (``revoked``, ``expired``), or None."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return None

    def to_dict(self, now: float | None = None) -> dict[str, object]:
        return {
            "id": self.id,
            "agent": self.agent,
            "scopes": list(self.scopes),
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
            "state": self.usable(time.time() if now is None else now) or "active",
        }


def hash_secret(secret: str) -> str:
    import hashlib  # here: OpenSSL's load is a cold command's cost, and most never hash

    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def mint(
    agent: str, scopes: tuple[str, ...], *, now: float, expires_in_s: float | None
) -> tuple[str, ApiToken]:
    """A fresh secret and the record to store for it."""
    import secrets

    from agentmaild.ids import new_id

    secret = PREFIX + secrets.token_urlsafe(32)
    record = ApiToken(
        id=new_id("tok"),
        agent=agent,
        scopes=scopes,
        hash=hash_secret(secret),
        created_at=now,
        expires_at=None if expires_in_s is None else now + expires_in_s,
    )
    return secret, record


def parse_scopes(given: list[str] | None, agent: str = OPERATOR_AGENT) -> tuple[str, ...]:
    """``--scope`` values (repeatable, or comma-separated) of a token for ``agent``; none given:
    the API's three. The dashboard's scopes are refused for any agent but ``operator``."""
    words = [w.strip() for g in given or [] for w in g.split(",") if w.strip()]
    for w in words:
        if w not in ALL_SCOPES:
            raise ValidationError(f"scope: unknown {w!r}; one of {', '.join(ALL_SCOPES)}")
        if w in DASHBOARD_SCOPES and agent != OPERATOR_AGENT:
            raise ValidationError(
                f"scope: {w!r} is for {OPERATOR_AGENT!r} tokens only (the dashboard shows and "
                f"steers every agent), not for {agent[:64]!r}"
            )
    return tuple(s for s in ALL_SCOPES if s in words) if words else SCOPES


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w`` → seconds."""
    match = _DURATION_RE.fullmatch(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise ValidationError(
            f"expires: expected a duration such as 30m, 12h, 7d or 2w, got {text!r}"
        )
    return float(match.group(1)) * _UNIT_S[match.group(2)]
