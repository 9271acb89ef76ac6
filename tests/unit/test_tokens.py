"""API tokens: minting, hashing, scopes, lifetimes, and the `tokens` commands on a real store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentmaild.cli.app import app
from agentmaild.errors import ValidationError
from agentmaild.store.sqlite import SqliteMailStore
from agentmaild.trust.tokens import PREFIX, SCOPES, hash_secret, mint, parse_duration, parse_scopes


def test_a_minted_token_is_random_and_only_its_hash_is_kept() -> None:
    one, rec = mint("bob", SCOPES, now=100.0, expires_in_s=None)
    two, _ = mint("bob", SCOPES, now=100.0, expires_in_s=None)
    assert one != two and one.startswith(PREFIX) and len(one) == len(PREFIX) + 43
    assert rec.hash == hash_secret(one) != one and one not in repr(rec)
    assert rec.usable(1e12) is None  # no expiry


@pytest.mark.parametrize(
    ("given", "scopes"),
    [(None, SCOPES), ([], SCOPES), (["read"], ("read",)), (["ack", "read"], ("read", "ack")),
     (["read,send"], ("read", "send")), (["send", "send"], ("send",)),
     (["control", "dashboard"], ("dashboard", "control")), (["read,control"], ("read", "control"))],
)  # fmt: skip
def test_scopes(given: list[str] | None, scopes: tuple[str, ...]) -> None:
    assert parse_scopes(given) == scopes


@pytest.mark.parametrize("scope", ["dashboard", "control", "read,control"])
def test_the_dashboard_scopes_are_an_operator_s_only(scope: str) -> None:
    with pytest.raises(ValidationError, match=r"^scope: '\w+' is for 'operator' tokens only"):
        parse_scopes([scope], "bob")
    assert parse_scopes(["read"], "bob") == ("read",)


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("30m", 1800), ("1.5h", 5400),
                                               ("7d", 604800), ("2w", 1209600)])  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "5x", "-1h", "0m", "h", "1e9d", "../1d"])
def test_bad_durations_and_scopes_name_the_option(text: str) -> None:
    with pytest.raises(ValidationError, match=r"^expires: "):
        parse_duration(text)
    with pytest.raises(ValidationError, match=r"^scope: unknown"):
        parse_scopes(["read", text or "write"])


def test_tokens_commands(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    runner = CliRunner()

    def cli(*args: str) -> tuple[int, str, str]:
        r = runner.invoke(app, [*args, "--db", str(db)])
        return r.exit_code, r.stdout, r.stderr

    code, out, _ = cli("tokens", "create", "bob", "--scope", "read", "--expires", "1h", "--json")
    made = json.loads(out)
    assert code == 0 and made["token"].startswith(PREFIX) and made["scopes"] == ["read"]
    code, out, _ = cli("tokens", "create", "operator")
    secret = out.strip()
    assert code == 0 and secret.startswith(PREFIX)
    store = SqliteMailStore(db)
    stored = store.find_token(hash_secret(secret))
    store.close()
    assert stored is not None and stored.operator and stored.expires_at is None
    code, out, _ = cli("tokens", "list")
    assert code == 0 and made["id"] in out and secret not in out and made["token"] not in out
    assert cli("tokens", "revoke", made["id"])[0] == 0
    code, _, err = cli("tokens", "revoke", made["id"])
    assert code == 1 and err.startswith("error: no token in force")
    listed = json.loads(cli("tokens", "list", "--json")[1])["tokens"]
    assert [t["state"] for t in listed] == ["revoked", "active"]
    for bad in (("--scope", "write"), ("--expires", "soon")):
        code, _, err = cli("tokens", "create", "bob", *bad)
        assert code == 1 and err.count("\n") == 1 and err.startswith("error: ")
    code, _, err = cli("tokens", "create", "../etc")
    assert code == 1 and "agent" in err
