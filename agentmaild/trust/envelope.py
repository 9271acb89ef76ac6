"""The signed envelope of a message sent from one trust domain to another.

The signature covers the canonical JSON (sorted keys, no spaces, UTF-8) of from, to, subject, the
body's SHA-256, payload, created_at, nonce, domain and the sender's message id, prefixed with a
domain-separation tag naming the envelope version, so a signature made for anything else (another
protocol, another version) never verifies here. Everything the receiver stores or keys on is in it:
version 3 adds the message id (the receiver's idempotency key and the origin it shows; version 2
sent it beside the envelope, where a man in the middle could change it); version 2 added the
payload (version 1 signed it as null). A receiver refuses versions 1 and 2 by their ``version``
field, see ``receive``. A receiver checks, in order: the key id names the peer's pinned key, the
signature, the body hash, and that ``created_at`` lies within the window (default 5 minutes old,
30 s ahead for skew).
Nonces are the caller's to remember until the window passes (the store does that, see the package
docstring).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import asdict, dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agentmaild.errors import Untrusted, ValidationError

VERSION = 3
TAG = b"agentmaild/envelope/v%d\x00" % VERSION
KEY_PREFIX = "ed25519:"
WINDOW_S = 300.0
SKEW_S = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    from_agent: str
    to_agent: str
    subject: str
    body_sha256: str
    payload: str | None
    created_at: float  # unix seconds, the sender's clock
    nonce: str
    domain: str  # the sending trust domain
    message_id: str  # the sender's id: the receiver's idempotency key and the origin it shows

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def canonical(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False).encode("utf-8")  # fmt: skip


def body_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def seal(
    *, from_agent: str, to_agent: str, subject: str, body: str, payload: str | None,
    created_at: float, domain: str, message_id: str,
) -> Envelope:  # fmt: skip
    """The envelope of one message, with a fresh 128-bit nonce."""
    return Envelope(from_agent=from_agent, to_agent=to_agent, subject=subject,
                    body_sha256=body_hash(body), payload=payload, created_at=created_at,
                    nonce=secrets.token_hex(16), domain=domain,
                    message_id=message_id)  # fmt: skip


# -- keys ---------------------------------------------------------------------------------------
def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_bytes(key: Ed25519PrivateKey) -> bytes:
    """The raw 32-byte seed, for a 0600 key file."""
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                             serialization.NoEncryption())  # fmt: skip


def load_private(raw: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(raw)


def public_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """``ed25519:<base64 of the 32 raw bytes>``: what ``peers add --public-key`` takes."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def parse_public(text: str) -> Ed25519PublicKey:
    if not text.startswith(KEY_PREFIX):
        raise ValidationError(f"public key: expected {KEY_PREFIX}<base64>, got {text[:40]!r}")
    try:
        raw = base64.b64decode(text[len(KEY_PREFIX):], validate=True)
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise ValidationError(f"public key: not an Ed25519 key ({exc})") from None


def key_id(text: str) -> str:
    """A short, stable name for a public key: 16 hex digits of its SHA-256."""
    return hashlib.sha256(parse_public(text).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)).hexdigest()[:16]  # fmt: skip


# -- signing and checking -----------------------------------------------------------------------
def sign(key: Ed25519PrivateKey, envelope: Envelope) -> str:
    return base64.b64encode(key.sign(TAG + envelope.canonical())).decode("ascii")


def verify(
    envelope: Envelope, signature: str, *, pinned: str, body: str, now: float,
    window_s: float = WINDOW_S, skew_s: float = SKEW_S,
) -> None:  # fmt: skip
    """Raise ``Untrusted`` naming the first check that fails; return when all hold."""
    try:
        raw = base64.b64decode(signature, validate=True)
        parse_public(pinned).verify(raw, TAG + envelope.canonical())
    except (InvalidSignature, ValueError):
        raise Untrusted(f"envelope from {envelope.domain!r}: bad signature") from None
    try:
        digest = body_hash(body)
    except UnicodeEncodeError:  # JSON's \ud800 escapes decode to lone surrogates
        raise Untrusted(f"envelope from {envelope.domain!r}: the body is not UTF-8 text") from None
    if digest != envelope.body_sha256:
        raise Untrusted(f"envelope from {envelope.domain!r}: the body does not match its hash")
    age = now - envelope.created_at
    if age > window_s:
        raise Untrusted(f"envelope from {envelope.domain!r}: {age:.0f}s old, the window is "
                        f"{window_s:g}s")  # fmt: skip
    if age < -skew_s:
        raise Untrusted(f"envelope from {envelope.domain!r}: {-age:.0f}s in the future "
                        f"(clock skew allowed: {skew_s:g}s)")  # fmt: skip
