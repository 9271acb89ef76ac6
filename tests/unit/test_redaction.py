"""A DSN's password taken out of text (agentmaild.store.redaction.scrub), in every reading."""

from __future__ import annotations

import pytest

from agentmaild.store.redaction import scrub


@pytest.mark.parametrize(
    ("dsn", "secrets"),
    [
        ("postgresql://am:S3cretPw@db:5433/mail", ["S3cretPw"]),
        ("postgresql://am:s3cr%40tPw@db/mail", ["s3cr%40tPw", "s3cr@tPw"]),  # as written, decoded
        ("postgresql://am:pa@ss@db/mail", ["pa@ss"]),  # libpq reads "pa", urllib "pa@ss"
        ("postgresql://am@db/mail?sslmode=require&password=QueryPw1", ["QueryPw1"]),
        ("postgres://am:Br0ken%zz@db/mail", ["Br0ken%zz"]),  # not even valid percent-encoding
        ("postgresql://am:Unclosed9@[::1/mail", ["Unclosed9"]),  # urllib cannot parse it at all
    ],
)
def test_every_reading_of_the_password_is_taken_out(dsn: str, secrets: list[str]) -> None:
    said = f'invalid token in URI: "{dsn}"; near "{secrets[0]}"; ' + " ".join(secrets)
    shown = scrub(said, dsn)
    for secret in secrets:
        assert secret not in shown, shown
    assert dsn not in shown and "***" in shown


def test_a_path_and_a_passwordless_dsn_keep_the_text() -> None:
    assert scrub("cannot open /tmp/pa ss/mail.db", "/tmp/pa ss/mail.db") == (
        "cannot open /tmp/pa ss/mail.db"
    )
    assert scrub("no route to db", "postgresql://am@db/mail") == "no route to db"
    # A DSN quoted whole is shown the way `status` names the store.
    assert scrub('bad: "postgresql://am:Pw9x@db/mail"', "postgresql://am:Pw9x@db/mail") == (
        'bad: "postgresql://am@db:5432/mail"'
    )
    # A reading inside a longer one ("pa" of "pa@ss") must not mangle the rest of the text.
    assert scrub("parse error at pa@ss", "postgresql://am:pa@ss@db/mail") == "parse error at ***"
