"""The HTTP error table against the whole error tree: every refusal of the caller's mail is a 4xx
(clients retry a 5xx), every other code is placed on purpose, and the client maps each mail error's
code back to its class (so the CLI over HTTP exits and prints as it does on the store file)."""

from __future__ import annotations

from agentmaild import errors
from agentmaild.http.client import error_from
from agentmaild.http.errors import SERVER_FAULTS, STATUS, status_of


def _tree(root: type[errors.AgentmaildError]) -> list[type[errors.AgentmaildError]]:
    found = [root]
    for sub in root.__subclasses__():
        found += _tree(sub)
    return found


def test_every_mail_error_is_a_client_error_the_client_maps_back() -> None:
    mail = [c for c in _tree(errors.MailError) if c is not errors.MailError]
    assert errors.LoopHeld in mail and len(mail) >= 8
    for cls in mail:
        assert 400 <= status_of(cls.code) < 500, (cls.__name__, cls.code, status_of(cls.code))
        assert type(error_from(cls.code, "m")) is cls, cls


def test_every_code_in_the_tree_is_placed_on_purpose() -> None:
    codes = {c.code for c in _tree(errors.AgentmaildError)}
    unplaced = sorted(code for code in codes if code not in STATUS and code not in SERVER_FAULTS)
    assert unplaced == []
    assert not set(STATUS) & SERVER_FAULTS
    assert status_of("loop_held") == 409


def test_the_held_thread_message_is_the_cli_s() -> None:
    from agentmaild.store.checks import held_error

    exc = held_error("msg-abc", "alice|bob")
    back = error_from(exc.code, exc.message)
    assert type(back) is errors.LoopHeld and back.message == exc.message
    assert "agentmaild limits reset --thread msg-abc" in back.message
