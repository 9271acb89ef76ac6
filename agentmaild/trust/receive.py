"""Accepting one signed envelope from a peer domain (``POST /v1/relay``), and the wire form.

The request is ``{"version": 3, "envelope": {...}, "signature", "key_id", "body"}``, the sender's
message id inside the signed envelope; any other version (version 1 had no such field, version 2
sent the message id unsigned beside the envelope) is one clear ``ValidationError`` naming the
version this domain takes. Then, in order, each a clear ``Untrusted``: the domain is a pinned peer,
the key id is its pinned key, the signature, the body hash, the freshness window, that ``to`` is
``peer:HERE/agent`` with HERE this domain's name (its key file's), then the nonce (remembered until
the window has passed, in the store). The message is delivered from ``peer:DOMAIN/agent`` with
idempotency key ``relay:<sender's message id>`` (signed, so only the sender can choose it), so a
retried relay returns the first delivery, never a second.
The signed payload travels with it; type and priority are not signed: relayed mail arrives as a
normal-priority ``status`` message.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from agentmaild.errors import ConfigError, NotFound, Untrusted, UsageError, ValidationError
from agentmaild.ids import check_message_id, check_name
from agentmaild.mail.mailer import Mailer, Sent
from agentmaild.trust import envelope, keyfile
from agentmaild.trust.envelope import Envelope
from agentmaild.trust.peers import PeerOrigin, peer_address, split_peer_address

ENVELOPE_FIELDS = frozenset(f.name for f in fields(Envelope))
WIRE_FIELDS = frozenset({"version", "envelope", "signature", "key_id", "body"})
# What the route reads: version 2's unsigned "message_id" too, so its refusal names the version.
REQUEST_FIELDS = WIRE_FIELDS | {"message_id"}
# What each older version failed to sign: the reason it is refused.
_UNSIGNED = {1: "it signed no payload and no message id", 2: "it did not sign the message id"}


def wire(env: Envelope, signature: str, key_id: str, body: str) -> dict[str, Any]:
    return {"version": envelope.VERSION, "envelope": env.to_dict(), "signature": signature,
            "key_id": key_id, "body": body}  # fmt: skip


def check_version(data: dict[str, Any]) -> None:
    version = data.get("version", 1)  # version 1 envelopes had no version field
    if version == envelope.VERSION and not isinstance(version, bool):
        return
    if type(version) is int and version in _UNSIGNED:
        raise ValidationError(
            f"envelope version {version} is refused ({_UNSIGNED[version]}): this domain takes "
            f"version {envelope.VERSION}; upgrade agentmaild on the sending domain"
        )
    raise ValidationError(f"envelope version {str(version)[:20]!r} is not supported: this domain "
                          f"takes version {envelope.VERSION}")  # fmt: skip


def parse(data: dict[str, Any]) -> tuple[Envelope, str, str, str]:
    """The envelope, signature, key id and body of a request, checked for shape only."""
    check_version(data)
    if set(data) - WIRE_FIELDS:
        raise ValidationError(f"body: unknown field 'message_id' beside a version "
                              f"{envelope.VERSION} envelope (it is signed inside it)")  # fmt: skip
    raw = data.get("envelope")
    if not isinstance(raw, dict) or set(raw) != ENVELOPE_FIELDS:
        raise ValidationError(
            f"envelope: an object with exactly {', '.join(sorted(ENVELOPE_FIELDS))}"
        )
    texts = [data.get(k) for k in ("signature", "key_id", "body")]
    if not all(isinstance(t, str) for t in texts):
        raise ValidationError("signature, key_id and body: strings")
    strings = all(isinstance(raw[k], str) for k in ENVELOPE_FIELDS - {"payload", "created_at"})
    stamp = raw["created_at"]
    number = isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and stamp == stamp
    if not (strings and number and (raw["payload"] is None or isinstance(raw["payload"], str))):
        raise ValidationError("envelope: fields of the wrong type")
    check_message_id(raw["message_id"])
    sig, key_id, body = (str(t) for t in texts)
    return Envelope(**raw), sig, key_id, body


def own_domain(db_target: str) -> str:
    """This domain's name, from its key file: an envelope must be addressed to it."""
    try:
        if not db_target:
            raise NotFound("no store path to find the key by")
        return keyfile.load(keyfile.key_path(db_target, None)).domain
    except (NotFound, UsageError) as exc:
        raise Untrusted(f"this domain has no key, so it cannot know which mail is addressed to "
                        f"it ({exc})") from None  # fmt: skip
    except ConfigError as exc:  # a key others could read: refused until fixed (the log says how)
        raise Untrusted(f"this domain's key is not used ({exc})") from None


def accept(
    mailer: Mailer, data: dict[str, Any], *, here: str, now: float, window_s: float,
    skew_s: float,
) -> tuple[Sent, str]:  # fmt: skip
    """Verify and deliver one relayed message addressed to the domain ``here``; returns what was
    sent and the peer's name."""
    env, sig, key_id, body = parse(data)
    origin_id = env.message_id  # signed: a changed id breaks the signature
    store = mailer.store
    peer = store.find_peer(env.domain) if isinstance(env.domain, str) else None
    if peer is None:
        raise Untrusted(f"envelope from {env.domain[:80]!r}: not a peer of this domain")
    if key_id != peer.key_id:
        raise Untrusted(f"envelope from {peer.name!r}: signed with key {key_id[:40]!r}, "
                        f"the pinned key is {peer.key_id}")  # fmt: skip
    envelope.verify(env, sig, pinned=peer.public_key, body=body, now=now,
                    window_s=window_s, skew_s=skew_s)  # fmt: skip
    domain, recipient = split_peer_address(env.to_agent)
    if domain != here:
        raise Untrusted(f"envelope from {peer.name!r}: addressed to domain {domain!r}, this is "
                        f"{here!r} (mail for another domain, replayed here?)")  # fmt: skip
    sender = peer_address(peer.name, check_name(env.from_agent, "sender"))
    until = env.created_at + window_s + skew_s
    if not store.claim_nonce(env.nonce, peer=peer.name, expires_at=until, now=now):
        raise Untrusted(f"envelope from {peer.name!r}: nonce already seen (a replay)")
    sent = mailer.send(sender=sender, to=recipient, subject=env.subject, body=body,
                       payload=env.payload, idempotency_key=f"relay:{origin_id}",
                       peer_sender=True)  # fmt: skip
    for m in sent.messages:
        store.record_peer_origin(PeerOrigin(message_id=m.id, peer=peer.name, key_id=peer.key_id,
                                            origin_id=origin_id))  # fmt: skip
    return sent, peer.name
