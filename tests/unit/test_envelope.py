"""Signed envelopes (agentmaild.trust.envelope): real Ed25519 keys, every refusal named."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path

import pytest

from agentmaild.errors import Untrusted, ValidationError
from agentmaild.trust import keyfile
from agentmaild.trust.envelope import (
    TAG,
    Envelope,
    key_id,
    load_private,
    new_private_key,
    parse_public,
    private_bytes,
    public_text,
    seal,
    sign,
    verify,
)
from agentmaild.trust.receive import REQUEST_FIELDS, WIRE_FIELDS, own_domain, parse, wire

NOW = 1_800_000_000.0
BODY = "please review PR 12 — ünïcode too"


def _signed() -> tuple[Envelope, str, str]:
    key = new_private_key()
    env = seal(from_agent="alice", to_agent="bob", subject="review", body=BODY,
               payload='{"pr":12}', created_at=NOW, domain="team-a",
               message_id="msg-abc1234567")  # fmt: skip
    return env, sign(key, env), public_text(key)


def test_a_sealed_envelope_verifies_against_the_pinned_key() -> None:
    env, sig, pub = _signed()
    verify(env, sig, pinned=pub, body=BODY, now=NOW + 10)
    assert len(env.nonce) == 32 and env.nonce != _signed()[0].nonce
    assert key_id(pub) == key_id(pub) and len(key_id(pub)) == 16


def test_canonical_form_is_stable_and_sorted() -> None:
    env, _, _ = _signed()
    text = env.canonical().decode()
    assert text.startswith('{"body_sha256":') and " " not in text.replace("PR 12", "")
    assert replace(env).canonical() == env.canonical()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"from_agent": "mallory"}, "bad signature"),
        ({"to_agent": "root"}, "bad signature"),
        ({"subject": "urgent!"}, "bad signature"),
        ({"payload": '{"pr":13}'}, "bad signature"),
        ({"created_at": NOW + 1}, "bad signature"),
        ({"nonce": "0" * 32}, "bad signature"),
        ({"domain": "team-b"}, "bad signature"),
        ({"message_id": "msg-abc1234568"}, "bad signature"),
    ],
)
def test_any_changed_field_breaks_the_signature(change: dict[str, object], why: str) -> None:
    env, sig, pub = _signed()
    with pytest.raises(Untrusted, match=why):
        verify(replace(env, **change), sig, pinned=pub, body=BODY, now=NOW)  # type: ignore[arg-type]


def test_tampered_body_wrong_key_old_future_and_untagged_are_refused() -> None:
    env, sig, pub = _signed()
    with pytest.raises(Untrusted, match="body does not match"):
        verify(env, sig, pinned=pub, body=BODY + ".", now=NOW)
    with pytest.raises(Untrusted, match="the body is not UTF-8 text"):
        verify(env, sig, pinned=pub, body="\ud800", now=NOW)
    with pytest.raises(Untrusted, match="bad signature"):
        verify(env, sig, pinned=public_text(new_private_key()), body=BODY, now=NOW)
    with pytest.raises(Untrusted, match="301s old, the window is 300s"):
        verify(env, sig, pinned=pub, body=BODY, now=NOW + 301)
    verify(env, sig, pinned=pub, body=BODY, now=NOW - 29)  # within the allowed skew
    with pytest.raises(Untrusted, match="in the future"):
        verify(env, sig, pinned=pub, body=BODY, now=NOW - 31)
    with pytest.raises(Untrusted, match="bad signature"):
        verify(env, "not base64!", pinned=pub, body=BODY, now=NOW)
    key = new_private_key()
    untagged = base64.b64encode(key.sign(env.canonical())).decode()
    with pytest.raises(Untrusted, match="bad signature"):  # domain separation: the tag counts
        verify(env, untagged, pinned=public_text(key), body=BODY, now=NOW)
    assert TAG == b"agentmaild/envelope/v3\x00"
    for old in (b"v1", b"v2"):  # an older version's signature is no version 3 signature
        tagged = b"agentmaild/envelope/" + old + b"\x00" + env.canonical()
        with pytest.raises(Untrusted, match="bad signature"):
            verify(env, base64.b64encode(key.sign(tagged)).decode(), pinned=public_text(key),
                   body=BODY, now=NOW)  # fmt: skip


def test_the_wire_form_is_version_3_and_older_versions_are_refused_by_name() -> None:
    env, sig, pub = _signed()
    data = wire(env, sig, key_id(pub), BODY)
    assert data["version"] == 3 and set(data) == WIRE_FIELDS == REQUEST_FIELDS - {"message_id"}
    assert parse(data) == (env, sig, key_id(pub), BODY)
    assert env.message_id == "msg-abc1234567"  # the id travels signed, inside the envelope
    # Version 2's form: the message id beside the envelope, unsigned.
    v2 = {**data, "version": 2, "envelope": {k: v for k, v in env.to_dict().items()
                                             if k != "message_id"}, "message_id": env.message_id}
    v1 = {k: v for k, v in v2.items() if k != "version"}  # version 1 had no version field
    for old, n, why in ((v1, 1, "signed no payload"), ({**v2, "version": 1}, 1, "signed no"),
                        (v2, 2, "did not sign the message id")):  # fmt: skip
        refusal = (rf"^envelope version {n} is refused \(it {why}.*\): this domain takes "
                   r"version 3; upgrade agentmaild on the sending domain$")  # fmt: skip
        with pytest.raises(ValidationError, match=refusal):
            parse(old)
    for odd in (4, "3", True, None, [3], 2.0):
        with pytest.raises(ValidationError, match="is not supported: this domain takes version 3"):
            parse({**data, "version": odd})
    with pytest.raises(ValidationError, match="unknown field 'message_id'"):
        parse({**data, "message_id": "msg-other1"})  # a v3 envelope's id is the signed one
    with pytest.raises(ValidationError, match="invalid message id"):
        parse({**data, "envelope": {**env.to_dict(), "message_id": "../x"}})


def test_keys_round_trip_and_bad_public_keys_are_named() -> None:
    key = new_private_key()
    again = load_private(private_bytes(key))
    assert public_text(again) == public_text(key)
    parse_public(public_text(key))
    for bad in ("ssh-ed25519 AAAA", "ed25519:!!!", "ed25519:" + "A" * 10):
        with pytest.raises(ValidationError, match=r"^public key: "):
            parse_public(bad)


def test_the_receiving_domain_is_named_by_its_key_file(tmp_path: Path) -> None:
    db = str(tmp_path / "mail.db")
    for target in ("", db):
        with pytest.raises(Untrusted, match="this domain has no key"):
            own_domain(target)
    keyfile.create(str(tmp_path / keyfile.FILE_NAME), "b")
    assert own_domain(db) == "b"
