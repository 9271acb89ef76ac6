"""Fuzzing the two doors into agentmaild: the control socket and the CLI.

Socket: raw bytes — malformed, oversized, unknown, path-like, control-character and invalid
UTF-8 requests — against a running `agentmaild serve`; every line within the size limit gets one
JSON reply (only an oversized line may see the connection closed instead), a refused request
leaves every row of the store as it was, and afterwards the daemon still answers ping.
CLI: the real typer app in-process (and the console entry point as a subprocess for argv and
stdin bytes): exit 0, 1 or 2, never a traceback, errors as one `error:` line or a JSON error
object; a failed command leaves every row as it was, and a send adds exactly the messages it
reports.

The store holds a bit of everything (unread, acked and dead-lettered mail, a nudge, an
idempotency record), so a command that writes before it refuses has something to change.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from agentmaild.cli.app import app
from agentmaild.control.protocol import COMMANDS, MAX_REQUEST_BYTES
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.reliability.conftest import DaemonProc, assert_sound, base_env
from tests.support.daemon import raw_exchange

# No deadline: every example is a round trip to a real daemon or a real SQLite file, and a loaded
# 2-core CI machine makes hypothesis' default 200 ms flake.
FUZZ = settings(
    max_examples=120, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Shutdown is the one command whose correct answer is to stop; reload re-reads the environment.
SAFE_COMMANDS = [c for c in COMMANDS if c not in ("shutdown",)]
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from([
        "../../etc/passwd", "/etc/shadow", "~root", "agent/../../x", "a\x00b", "\x1b[2J",
        "line\nbreak", "\r\n", "\u202eevil", "%s%n", "{agent}", "'; DROP TABLE messages; --",
        "x" * 5000, "@all", "", " ", "msg-", "dlv-zzzzzz",
    ]),
)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | NASTY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NASTY_TEXT, inner, max_size=4),
    max_leaves=12,
)


def _request_line(draw_cmd: Any, args: Any, v: Any) -> bytes:
    return json.dumps({"v": v, "cmd": draw_cmd, "args": args}).encode() + b"\n"


REQUESTS = st.one_of(
    st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"") + b"\n"),
    st.builds(
        _request_line,
        st.sampled_from(SAFE_COMMANDS) | NASTY_TEXT,
        st.dictionaries(
            st.sampled_from(["agent", "agents", "delivery", "timeout_s", "x", "../"]) | NASTY_TEXT,
            JSONISH, max_size=3,
        ) | JSONISH,
        st.sampled_from([1, 1, 1, 0, 2, "1", True, None, 1.0]),
    ),
    JSONISH.map(lambda j: json.dumps(j).encode() + b"\n"),
    # Well-formed envelopes, so the fuzz reaches the command handlers' argument checks too.
    st.builds(
        _request_line,
        st.sampled_from(SAFE_COMMANDS),
        st.dictionaries(
            st.sampled_from(["agent", "agents", "delivery", "timeout_s"]), JSONISH, max_size=2
        ),
        st.just(1),
    ),
)


def _store_with_agents(db: Path) -> None:
    """Agents, and mail in every state for ``sink``, a pull agent: no daemon loop touches it."""
    store = SqliteMailStore(db)
    try:
        store.add_agent(Agent(name="bob", capability="lead"))
        store.add_agent(Agent(name="worker", capability="builder", channel="spawn",
                              command=("/bin/true",)))
        store.add_agent(Agent(name="sink", capability="builder"))
        mailer = Mailer(store)
        mailer.send(sender="bob", to="sink", subject="dead", body="d", priority="low",
                    idempotency_key="k1")
        dead = store.claim("sink", max_messages=5, max_chars=10_000, lease_s=60, now=time.time())
        assert dead is not None
        store.release(dead.delivery_id, error="boom", max_attempts=1, now=time.time())
        mailer.send(sender="bob", to="sink", subject="acked", body="a")
        done = store.claim("sink", max_messages=5, max_chars=10_000, lease_s=60, now=time.time())
        assert done is not None
        store.ack_delivery(done.delivery_id, now=time.time())
        mailer.send(sender="bob", to="sink", subject="unread", body="u", priority="urgent")
        assert store.dead_letters("sink")
    finally:
        store.close()


def snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of ``messages`` and of each ``am_*`` table, in a stable order."""
    conn = sqlite3.connect(str(db), timeout=10)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND (name = 'messages' OR name LIKE 'am\\_%' ESCAPE '\\') ORDER BY name"
        )]
        assert {"messages", "am_agents", "am_deliveries", "am_nudges"} <= set(tables), tables
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)
                for t in tables}
    finally:
        conn.close()


def test_control_socket_survives_garbage(
    db: Path, daemons: Callable[..., DaemonProc]
) -> None:
    _store_with_agents(db)
    d = daemons()
    assert d.proc is not None
    replies: dict[str, int] = {}

    @FUZZ
    @given(payload=REQUESTS)
    @example(payload=b"\xff\xfe\xfd\n")
    @example(payload=b'{"v": 1, "cmd": "ping\xc3\x28"}\n')
    @example(payload=b"{" * 100_000 + b"\n")
    @example(payload=b"x" * (MAX_REQUEST_BYTES + 10) + b"\n")
    @example(payload=b'{"v": 1, "cmd": "drain", "args": {"timeout_s": 1e308}}\n')
    @example(payload=b'{"v": 1, "cmd": "pause", "args": {"agent": "../../etc/passwd"}}\n')
    @example(payload=b'{"v": 1, "cmd": "retry", "args": {"delivery": "/etc/passwd"}}\n')
    @example(payload=b'{"v": 1, "cmd": "wake", "args": {"agents": ["\\u0000", "\\u001b"]}}\n')
    @example(payload=b'{"v": 1, "cmd": "ping", "args": {}, "v": NaN}\n')
    def one(payload: bytes) -> None:
        before = snapshot(db)
        reply = raw_exchange(d.sock, payload)
        if not reply:
            # The daemon answers every request line it reads; it may close on one it refuses to
            # read in full (over the limit: the reply can be lost to the connection reset).
            assert len(payload.rstrip(b"\n")) > MAX_REQUEST_BYTES, payload[:200]
            replies["closed"] = replies.get("closed", 0) + 1
        else:
            assert reply.endswith(b"\n") and reply.count(b"\n") == 1, reply[:200]
            obj = json.loads(reply)
            assert obj["v"] == 1 and isinstance(obj["ok"], bool), obj
            code = "ok" if obj["ok"] else obj["error"]["code"]
            assert code != "internal", (payload[:200], obj)
            replies[code] = replies.get(code, 0) + 1
            if not obj["ok"]:
                assert snapshot(db) == before, ("a refused request changed the store", obj)
        assert d.alive(), d.tail()

    try:
        one()
        d.ctl("resume")  # a fuzzed pause or drain may have parked the loops
        assert d.ctl("ping")["pid"] == d.proc.pid
    finally:
        print(f"control socket fuzz: replies by code {replies}")
    assert d.stop() == 0
    assert_sound(db)
    assert replies.get("ok") and len(replies) > 3, replies  # the fuzz reached the handlers


# -- the CLI ----------------------------------------------------------------------------------


def _cli_ok(result: Any, as_json: bool) -> None:
    """Exit 0/1/2, no traceback; an error is one `error:` line (or a JSON error object)."""
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output, result.exception)
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), repr(exc)
    err = result.stderr
    assert "Traceback" not in err and "Traceback" not in result.stdout, err
    if result.exit_code == 1:
        if as_json:
            obj = json.loads(result.stdout)
            assert obj["ok"] is False and obj["error"]["code"] and obj["error"]["message"]
        else:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), err


NAMES = st.one_of(st.sampled_from(["bob", "worker", "nobody", "@all", "@builders"]), NASTY_TEXT)
PAYLOADS = st.one_of(st.none(), NASTY_TEXT, JSONISH.map(json.dumps))


@pytest.fixture
def runner(db: Path, tmp_path: Path) -> CliRunner:
    _store_with_agents(db)
    env = base_env(tmp_path)
    return CliRunner(env={k: env.get(k) for k in ("XDG_CONFIG_HOME", "AGENTMAIL_AGENT")})


def _ids(rows: dict[str, list[tuple[Any, ...]]]) -> set[str]:
    return {row[0] for row in rows["messages"]}


VALID_SEND: dict[str, Any] = {
    "to": "worker", "subject": "s", "body": "b", "sender": "bob", "type": "status",
    "priority": "low", "payload": None, "thread": None, "key": None, "as_json": False,
}


def test_cli_send_fuzz(runner: CliRunner, db: Path) -> None:
    outcomes: dict[int, int] = {}

    @FUZZ
    @given(
        to=NAMES, subject=NASTY_TEXT, body=NASTY_TEXT, sender=NAMES,
        type=st.sampled_from(["status", "question", "worker_done", "dispatch", "nope", ""]),
        priority=st.sampled_from(["low", "urgent", "URGENT", "", "normal\n"]),
        payload=PAYLOADS, thread=st.none() | NASTY_TEXT, key=st.none() | NASTY_TEXT,
        as_json=st.booleans(),
    )
    # Valid sends are rare among random arguments: a broadcast, a single send, and a repeat of
    # the store's idempotent send (a duplicate: it reports the earlier ids and writes nothing).
    @example(**{**VALID_SEND, "to": "@all"})
    @example(**{**VALID_SEND, "to": "@builders", "as_json": True})
    @example(**{**VALID_SEND, "to": "worker", "payload": '{"k": [1, "\u202e"]}'})
    @example(**{**VALID_SEND, "to": "sink", "subject": "dead", "body": "d", "key": "k1"})
    @example(**{**VALID_SEND, "to": "sink", "subject": "dead", "body": "d", "key": "k1",
                "as_json": True})
    def one(**kw: Any) -> None:
        args = ["send", "--db", str(db), "--to", kw["to"], "--subject", kw["subject"],
                "--body", kw["body"], "--from", kw["sender"], "--type", kw["type"],
                "--priority", kw["priority"]]
        for flag, key in (("--payload", "payload"), ("--thread", "thread"),
                          ("--idempotency-key", "key")):
            if kw[key] is not None:
                args += [flag, kw[key]]
        if kw["as_json"]:
            args.append("--json")
        before = snapshot(db)
        result = runner.invoke(app, args)
        _cli_ok(result, kw["as_json"])
        outcomes[result.exit_code] = outcomes.get(result.exit_code, 0) + 1
        after = snapshot(db)
        if result.exit_code != 0:
            assert after == before, "a failed send changed the store"
            return
        if kw["as_json"]:
            sent = json.loads(result.stdout)
            ids, duplicate = sent["ids"], sent["duplicate"]
        else:
            ids = result.stdout.split()
            duplicate = bool(ids) and ids[0] in _ids(before)
        assert ids and all(i.startswith("msg-") for i in ids), result.stdout
        # A send adds exactly the messages it reports; a duplicate reports the earlier ones.
        assert _ids(after) - _ids(before) == (set() if duplicate else set(ids))
        assert set(ids) <= _ids(after)

    one()
    print(f"cli send fuzz: exit codes {outcomes}")
    assert outcomes.get(0, 0) >= 5, outcomes  # the valid examples were sent
    assert_sound(db)


def _read_only(args: list[str]) -> bool:
    return args[0] in ("read", "thread", "inbox", "list") or args[:2] == ["agents", "show"]


def test_cli_ids_and_names_fuzz(runner: CliRunner, db: Path) -> None:
    outcomes: dict[int, int] = {}
    commands = st.sampled_from([
        lambda x: ["read", x], lambda x: ["ack", x], lambda x: ["thread", x],
        lambda x: ["reply", x, "--body", "hi"], lambda x: ["inbox", "--agent", x],
        lambda x: ["check", "--agent", x],
        lambda x: ["retry", "--agent", x], lambda x: ["retry", "--delivery", x],
        lambda x: ["agents", "show", x],
        lambda x: ["agents", "add", x, "--capability", "builder"],
        lambda x: ["ctl", x], lambda x: ["ctl", "pause", f"agent={x}"],
        lambda x: ["list", "--to", x, "--limit", "3"], lambda x: ["purge", "--agent", x],
    ])

    real = sorted(_ids(snapshot(db)) | {r[0] for r in snapshot(db)["am_deliveries"]})
    values = (NASTY_TEXT | st.from_regex(r"(msg|dlv)-[a-z0-9]{1,50}")
              | st.from_regex(r"(msg|dlv)-[a-z0-9]{1,50}", fullmatch=True) | st.sampled_from(real))

    @FUZZ
    @given(make=commands, value=values, as_json=st.booleans())
    # Well-formed ids of nothing: refused after the store is opened, so nothing may have moved.
    @example(make=lambda x: ["retry", "--delivery", x], value="dlv-0notthere0", as_json=False)
    @example(make=lambda x: ["retry", "--delivery", x], value="dlv-0notthere0", as_json=True)
    @example(make=lambda x: ["reply", x, "--body", "hi"], value="msg-0notthere0", as_json=False)
    def one(make: Callable[[str], list[str]], value: str, as_json: bool) -> None:
        args = make(value) + ["--db", str(db)] + (["--json"] if as_json else [])
        before = snapshot(db)
        result = runner.invoke(app, args)
        _cli_ok(result, as_json)
        outcomes[result.exit_code] = outcomes.get(result.exit_code, 0) + 1
        if result.exit_code != 0 or _read_only(args):
            assert snapshot(db) == before, ("the store changed", args, result.output)

    one()
    print(f"cli ids fuzz: exit codes {outcomes}")
    assert_sound(db)


# -- the real entry point, bytes the OS hands it ------------------------------------------------


def _entry(
    db: Path, tmp: Path, args: list[bytes], stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"agentmaild", *args, b"--db", os.fsencode(db)],
        input=stdin, capture_output=True, env=base_env(tmp), timeout=30,
    )


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        ([b"send", b"--to", b"bob", b"--subject", b"s", b"--body", b"-"], b"\xff\xfe bad \x80"),
        ([b"send", b"--to", b"bob", b"--subject", b"\xff\xfe", b"--body", b"x"], b""),
        ([b"send", b"--to", b"b\xc3\x28ob", b"--subject", b"s", b"--body", b"x"], b""),
        ([b"send", b"--to", b"bob", b"--subject", b"s", b"--type", b"dispatch",
          b"--payload", b"{\"a\": \xff}", b"--body", b"x"], b""),
        ([b"read", b"msg-\xff\xfe"], b""),
        ([b"check", b"--inject", b"--agent", b"\xff"], b""),
        ([b"send", b"--to", b"bob", b"--subject", b"s", b"--body", b"-", b"--json"],
         b"\xc0\xaf"),
    ],
)
def test_entry_point_with_undecodable_bytes(
    db: Path, tmp_path: Path, args: list[bytes], stdin: bytes
) -> None:
    _store_with_agents(db)
    before = snapshot(db)
    done = _entry(db, tmp_path, args, stdin)
    err = done.stderr.decode(errors="replace")
    assert done.returncode in (1, 2), (done.returncode, err)
    assert "Traceback" not in err, err
    if b"--json" in args:
        assert json.loads(done.stdout)["ok"] is False
    else:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert snapshot(db) == before
    assert_sound(db)


def test_retry_unknown_delivery_error_is_one_line(runner: CliRunner, db: Path) -> None:
    result = runner.invoke(app, ["retry", "--delivery", "\r0\n\x1b[2Jfake: ok", "--db", str(db)])
    _cli_ok(result, as_json=False)
