"""Peer trust domains: the pinned-key record, and the ``peer:NAME/agent`` address form.

``peer:NAME/agent`` is the only address with ':' and '/' in it: the recipient of mail this store
relays to the peer NAME, and the sender shown on mail a peer's verified envelope delivered here.
Stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentmaild.errors import ValidationError
from agentmaild.ids import check_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from agentmaild.models import Message
    from agentmaild.store.base import MailStore

PEER_PREFIX = "peer:"


@dataclass(frozen=True, slots=True, kw_only=True)
class Peer:
    """One ``am_peers`` row: a trusted domain, its pinned Ed25519 key and where it listens."""

    name: str
    public_key: str  # ed25519:<base64>
    key_id: str
    url: str | None
    created_at: float

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "public_key": self.public_key, "key_id": self.key_id,
                "url": self.url, "created_at": self.created_at}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerOrigin:
    """One ``am_peer_messages`` row: where a message that arrived from a peer came from."""

    message_id: str
    peer: str
    key_id: str
    origin_id: str  # the sender's message id (the idempotency key of the relay)

    def to_dict(self) -> dict[str, str]:
        return {"peer": self.peer, "key_id": self.key_id, "origin_id": self.origin_id}


def with_origins(
    store: MailStore, found: Sequence[Message], *, whole: bool
) -> list[dict[str, Any]]:
    """Each message as JSON (``whole``: ``to_dict``, else the probe's ``summary``); one that a
    peer's verified envelope delivered carries ``origin``: its peer domain, the key id its
    signature was checked against and the peer's own message id. The CLI and the API both
    answer with these rows."""
    rows = []
    for m in found:
        row = m.to_dict() if whole else m.summary()
        origin = store.peer_origin(m.id) if is_peer_address(m.from_agent) else None
        if origin is not None:
            row["origin"] = origin.to_dict()
        rows.append(row)
    return rows


def is_peer_address(address: str) -> bool:
    return address.startswith(PEER_PREFIX)


def split_peer_address(address: str) -> tuple[str, str]:
    """``peer:NAME/agent`` -> (NAME, agent), both checked as names; anything else is refused."""
    rest = address[len(PEER_PREFIX) :] if is_peer_address(address) else ""
    peer, sep, agent = rest.partition("/")
    if not sep:
        raise ValidationError(f"peer address: expected peer:NAME/agent, got {address[:80]!r}")
    try:
        return check_name(peer, "peer"), check_name(agent, "agent")
    except ValidationError as exc:
        raise ValidationError(f"peer address {address[:80]!r}: {exc}") from None


def peer_address(peer: str, agent: str) -> str:
    return f"{PEER_PREFIX}{peer}/{agent}"
