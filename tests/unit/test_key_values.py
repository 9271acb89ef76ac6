"""``KEY=VALUE`` words as ``agents add --setting`` and ``ctl`` take them (``mail.jsoninput``):
JSON values where they parse, text otherwise, and one error naming the word for the rest."""

from __future__ import annotations

import pytest

from agentmaild.errors import ValidationError
from agentmaild.mail.jsoninput import key_values


def test_values_are_json_where_they_parse() -> None:
    got = key_values(["n=3", "on=true", "env={\"A\": \"b\"}", "name=bob", "eq=a=b", "empty="],
                     "--setting")  # fmt: skip
    assert got == {"n": 3, "on": True, "env": {"A": "b"}, "name": "bob", "eq": "a=b", "empty": ""}


@pytest.mark.parametrize(
    ("pair", "says"),
    [("agent", "argument 'agent': expected KEY=VALUE"),
     ("=x", "argument '=x': expected KEY=VALUE"),
     ("n=NaN", "argument n: "),
     ("bad\ud800key=1", "argument bad")],
)  # fmt: skip
def test_what_it_refuses_names_the_word(pair: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        key_values(["ok=1", pair], "argument")
    assert caught.value.message.startswith(says)
    assert "\n" not in caught.value.message
