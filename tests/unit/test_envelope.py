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
from agentmaild.trust.receive import REQUEST_FIELDS, own_domain, parse, wire

NOW = 1_800_000_000.0
BODY = "please review PR 12 — ünïcode too"


def _signed() -> tuple[Envelope, str, str]:
    key = new_private_key()
    env = seal(from_agent="alice", to_agent="bob", subject="review", body=BODY,
               payload='{"pr":12}', created_at=NOW, domain="team-a")  # fmt: skip
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
    assert TAG == b"agentmaild/envelope/v2\x00"
    v1 = base64.b64encode(key.sign(b"agentmaild/envelope/v1\x00" + env.canonical())).decode()
    with pytest.raises(Untrusted, match="bad signature"):  # a v1 signature is no v2 signature
        verify(env, v1, pinned=public_text(key), body=BODY, now=NOW)


def test_the_wire_form_is_version_2_and_version_1_is_refused_by_name() -> None:
    env, sig, pub = _signed()
    data = wire(env, sig, key_id(pub), BODY, "msg-abc1234567")
    assert data["version"] == 2 and set(data) == REQUEST_FIELDS
    assert parse(data) == (env, sig, key_id(pub), BODY, "msg-abc1234567")
    v1 = {k: v for k, v in data.items() if k != "version"}  # version 1 had no version field
    for old in (v1, {**data, "version": 1}):
        with pytest.raises(ValidationError, match=r"envelope version 1 is refused .* takes "
                                                  r"version 2; upgrade agentmaild"):  # fmt: skip
            parse(old)
    for odd in (3, "2", True, None, [2]):
        with pytest.raises(ValidationError, match="is not supported: this domain takes version 2"):
            parse({**data, "version": odd})


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
