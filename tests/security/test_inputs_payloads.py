"""JSON from users and agents that used to crash the CLI: huge numbers, deep nesting, bad text.

Each input goes through the real console entry point as a subprocess. Every refusal is one
``error:`` line and exit 1 (a JSON error object on stdout with ``--json``), never a traceback,
and the store is unchanged. The payload parser itself is fuzzed with hypothesis against a real
SQLite store: it raises nothing but ``ValidationError``, and what it accepts reads back equal.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentmaild.errors import ValidationError
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore

pytestmark = pytest.mark.timeout(120)

DEEP = "[" * 5000 + "]" * 5000
BIG_INT = "1" * 5000
# What used to escape as a traceback (or, for NaN, was already refused): each must be refused.
BAD_JSON = {
    "overflow": '{"a": 1e999}',
    "negative-overflow": '{"a": -1e999}',
    "deep": DEEP,
    "deep-object": '{"a":' * 2000 + "1" + "}" * 2000,
    "digits": '{"a": ' + BIG_INT + "}",
    "surrogate": '{"a": "\\ud800"}',
    "surrogate-key": '{"\\udfff": 1}',
    "nan": '{"a": NaN}',
    "infinity": '{"a": [Infinity]}',
    "over-100-levels": "[" * 101 + "]" * 101,
}
REASONS = {
    "overflow": "finite",
    "negative-overflow": "finite",
    "deep": "nested deeper",
    "deep-object": "nested deeper",
    "digits": "digits",
    "surrogate": "surrogate",
    "surrogate-key": "surrogate",
    "nan": "finite",
    "infinity": "finite",
    "over-100-levels": "nested deeper",
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "AGENTMAILD_"))
    }
    db = tmp_path / "mail.db"
    clean.update(
        AGENTMAIL_DB=str(db),
        HOME=str(tmp_path),
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        PYTHONIOENCODING="utf-8",
    )
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="builder"))
    store.add_agent(Agent(name="ann", capability="lead"))
    store.close()
    return clean


def _run(env: dict[str, str], *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "agentmaild", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=60,
    )
    return subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def _snapshot(env: dict[str, str]) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(env["AGENTMAIL_DB"])
    try:
        rows = conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
        agents = conn.execute("SELECT name, settings FROM am_agents ORDER BY name").fetchall()
        return [*rows, *agents]
    finally:
        conn.close()


def _refused(env: dict[str, str], args: list[str], reason: str) -> None:
    """Human form: one `error:` line naming ``reason``; JSON form: the error object; exit 1."""
    before = _snapshot(env)
    human = _run(env, *args)
    assert human.returncode == 1, (human.returncode, human.stderr[-600:])
    assert "Traceback" not in human.stderr + human.stdout, human.stderr[-600:]
    lines = human.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), human.stderr[-600:]
    assert reason in lines[0], lines[0]
    assert len(lines[0]) < 300, "the error line quotes the whole input"
    as_json = _run(env, *args, "--json")
    assert as_json.returncode == 1, (as_json.returncode, as_json.stderr[-600:])
    assert "Traceback" not in as_json.stderr, as_json.stderr[-600:]
    out = json.loads(as_json.stdout)
    assert out["ok"] is False and out["error"]["code"] == "invalid", out
    assert reason in out["error"]["message"], out
    assert _snapshot(env) == before, "a refused command changed the store"


@pytest.mark.parametrize("case", sorted(BAD_JSON))
def test_send_refuses_payloads_that_used_to_crash(env: dict[str, str], case: str) -> None:
    args = ["send", "--to", "bob", "--subject", "s", "--body", "b", "--payload", BAD_JSON[case]]
    _refused(env, args, REASONS[case])


@pytest.mark.parametrize("case", ["overflow", "deep", "digits", "surrogate"])
def test_reply_refuses_the_same_payloads(env: dict[str, str], case: str) -> None:
    sent = _run(env, "send", "--to", "bob", "--subject", "s", "--body", "b", "--json")
    original = json.loads(sent.stdout)["ids"][0]
    args = ["reply", original, "--from", "bob", "--body", "r", "--payload", BAD_JSON[case]]
    _refused(env, args, REASONS[case])


def test_send_accepts_big_but_finite_payloads(env: dict[str, str]) -> None:
    payload = '{"big": 1e308, "n": ' + "9" * 4300 + ', "deep": ' + "[" * 99 + "]" * 99 + "}"
    sent = _run(env, "send", "--to", "bob", "--subject", "s", "--body", "b", "--payload", payload)
    assert sent.returncode == 0, sent.stderr[-600:]
    got = json.loads(_run(env, "read", sent.stdout.strip(), "--json").stdout)
    assert got["message"]["payload"] == json.loads(payload)


@pytest.mark.parametrize("case", ["overflow", "deep", "digits", "surrogate", "nan"])
def test_agent_settings_refuse_them(env: dict[str, str], case: str) -> None:
    args = ["agents", "add", "carl", "--capability", "builder", "--channel", "pull",
            "--setting", f"x={BAD_JSON[case]}"]  # fmt: skip
    _refused(env, args, REASONS[case])
    update = ["agents", "update", "bob", "--setting", f"x={BAD_JSON[case]}"]
    _refused(env, update, REASONS[case])


def test_agent_settings_still_take_plain_text_and_json(env: dict[str, str]) -> None:
    args = ["agents", "update", "bob", "--setting", "a=plain words", "--setting", "b=[1, 2.5]"]
    assert _run(env, *args).returncode == 0
    shown = json.loads(_run(env, "agents", "show", "bob", "--json").stdout)
    assert shown["agent"]["settings"] == {"a": "plain words", "b": [1, 2.5]}


def test_agent_settings_refuse_text_that_is_not_utf8(env: dict[str, str]) -> None:
    before = _snapshot(env)
    proc = subprocess.run(
        [sys.executable, "-m", "agentmaild", "agents", "update", "bob", "--setting", b"x=\xff"],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr[-600:]
    assert proc.stderr.decode().startswith("error: --setting x: ")
    assert b"Traceback" not in proc.stderr
    assert _snapshot(env) == before


@pytest.mark.parametrize("case", ["overflow", "deep", "digits", "surrogate"])
def test_ctl_arguments_refuse_them_before_any_daemon_is_asked(
    env: dict[str, str], case: str
) -> None:
    # No daemon runs: a parse failure must be reported as such, not as "daemon not running".
    _refused(env, ["ctl", "wake", f"agents={BAD_JSON[case]}"], REASONS[case])


def test_hook_with_deeply_nested_stdin_still_records_the_turn(env: dict[str, str]) -> None:
    # Before: the RecursionError escaped the parser, the hook gave up and the turn state was lost.
    hook = _run(env, "hook", "user-prompt-submit", "--agent", "bob", stdin=DEEP.encode())
    assert hook.returncode == 0 and hook.stdout == "" and "Traceback" not in hook.stderr
    conn = sqlite3.connect(env["AGENTMAIL_DB"])
    try:
        state = conn.execute("SELECT turn_state FROM am_agents WHERE name = 'bob'").fetchone()[0]
    finally:
        conn.close()
    assert state == "busy"


# -- the payload parser, fuzzed ---------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and ±inf included
    st.text(st.characters(codec=None, exclude_categories=()), max_size=12),  # surrogates too
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(st.characters(exclude_categories=()), max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _nested(depth: int, open_: str, close: str) -> str:
    return open_ * depth + "0" + close * depth


PAYLOAD_TEXT = st.one_of(
    VALUES.map(lambda v: json.dumps(v, ensure_ascii=False)),
    VALUES.map(json.dumps),  # the same with \\u escapes: lone surrogates written as escapes
    st.integers(1, 7000).map(lambda n: _nested(n, "[", "]")),
    st.integers(1, 2500).map(lambda n: _nested(n, '{"k":', "}")),
    st.integers(1, 6000).map(lambda n: "-" * (n % 2) + "7" * n),
    st.integers(4290, 4310).map(lambda n: '{"n": [' + "7" * n + "]}"),  # the digit limit
    st.sampled_from(["1e999", "-1e400", "NaN", "Infinity", "-Infinity", "1E+309", "2e-999"]),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
)
TYPES = st.sampled_from(["status", "result", "worker_done", "escalation", "dispatch"])


def test_payload_parser_fuzz(tmp_path: Path) -> None:
    store = SqliteMailStore(tmp_path / "fuzz.db")
    store.add_agent(Agent(name="bob", capability="builder"))
    mailer = Mailer(store)
    outcomes = {"accepted": 0, "refused": 0}

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(raw=PAYLOAD_TEXT, msg_type=TYPES)
    @example(raw='{"a": 1e999}', msg_type="status")
    @example(raw=DEEP, msg_type="status")
    @example(raw=BIG_INT, msg_type="status")
    @example(raw='"\\ud800"', msg_type="status")
    @example(raw='"\\ud83d\\ude00 ok"', msg_type="status")
    def one(raw: str, msg_type: str) -> None:
        before = store.totals()["messages"]
        try:
            sent = mailer.send(
                sender="ann", to="bob", subject="s", body="b", type=msg_type, payload=raw
            )
        except ValidationError as exc:
            outcomes["refused"] += 1
            refusal = exc.message
        else:
            refusal = None
        if refusal is not None:
            assert refusal.startswith("payload"), refusal
            assert store.totals()["messages"] == before
            return
        outcomes["accepted"] += 1
        stored = store.get_message(sent.ids[0])
        assert stored is not None
        if raw == "":
            assert stored.payload is None  # an empty --payload means none
            return
        assert stored.payload is not None
        assert json.loads(stored.payload) == json.loads(raw)
        stored.payload.encode("utf-8")  # printable and storable as it is

    try:
        one()
    finally:
        store.close()
        print(f"payload fuzz: {outcomes}")
    assert outcomes["accepted"] and outcomes["refused"]
