"""Team rules are the store's (issue 33 item 6).

The loop guard, the repeat collapse, the rate limit and the content limits a send is judged by are
the store's (its daemon's ``[limits]``, written at start and on reload; the built-in defaults while
none was written), never the sender's own config or environment. A thread held for a pair refuses
every send between the two on it: a group send, an idempotent send and a send whose sender turned
its own guard off included. Every test runs the real CLI and daemon, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentmaild.errors import LoopHeld
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.checks import held_error
from tests.support.net import daemon_answers
from tests.support.store_targets import StoreTarget, cli, ok
from tests.support.waiting import wait_for

GUARD_OFF = {"AGENTMAILD_LIMITS_PINGPONG_MAX": "0"}


def refused(env: dict[str, str], *args: str) -> dict[str, Any]:
    """``agentmaild --json ARGS`` that must fail: its error object."""
    done = cli(env, "--json", *args)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    error: dict[str, Any] = json.loads(done.stdout)["error"]
    return error


def seed(target: StoreTarget) -> None:
    """lead; builders a, b and c (mail only: nothing is delivered)."""
    store = target.open()
    try:
        store.add_agent(Agent(name="lead", capability="lead"))
        for name in ("a", "b", "c"):
            store.add_agent(Agent(name=name, capability="builder", parent="lead"))
    finally:
        store.close()


def held_thread(target: StoreTarget) -> str:
    """A thread a and b replied on until the loop guard (the built-in pingpong_max) held it."""
    store = target.open()
    try:
        mailer = Mailer(store)
        root = mailer.send(sender="a", to="b", subject="loop", body="start").ids[0]
        for i in range(200):
            sender, to = ("b", "a") if i % 2 == 0 else ("a", "b")
            try:
                mailer.send(sender=sender, to=to, subject="loop", body=f"{i}", thread_id=root)
            except LoopHeld:
                return root
        raise AssertionError("the loop guard never held the thread")
    finally:
        store.close()


def thread_size(target: StoreTarget, thread: str) -> int:
    return len(ok(target.env, "thread", thread)["messages"])


@contextmanager
def daemon(target: StoreTarget, tmp_path: Path, env: dict[str, str]) -> Iterator[None]:
    """``agentmaild serve`` on the target with ``env``, until its socket answers; stopped after."""
    log = (tmp_path / "daemon.log").open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=env, stdout=log,
                            stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: proc.poll() is not None or daemon_answers(target.socket), 30,
                 "the daemon's socket")  # fmt: skip
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        log.close()


def store_rules(target: StoreTarget) -> dict[str, Any]:
    shown: dict[str, Any] = ok(target.env, "limits", "show")
    return shown


def test_a_sender_with_its_guard_off_cannot_pass_a_held_thread(
    store_target: StoreTarget, tmp_path: Path
) -> None:
    seed(store_target)
    root = held_thread(store_target)
    before = thread_size(store_target, root)
    words = held_error(root, "a|b").message
    own_config = tmp_path / "own.toml"
    own_config.write_text("[limits]\npingpong_max = 0\npingpong_window_s = 0.001\n")
    for env in (store_target.with_env(**GUARD_OFF),
                store_target.with_env(AGENTMAILD_CONFIG=str(own_config))):  # fmt: skip
        error = refused(env, "reply", root, "--from", "a", "-b", "one more")
        assert error == {"code": "loop_held", "message": words}
        error = refused(env, "send", "--from", "b", "--to", "a", "-s", "x", "-b", "y",
                        "--thread", root)  # fmt: skip
        assert error == {"code": "loop_held", "message": words}
        # An idempotent send carries no guard of its own: the held thread refuses it all the same.
        error = refused(env, "reply", root, "--from", "b", "-b", "z", "--idempotency-key", "k1")
        assert error == {"code": "loop_held", "message": words}
    assert thread_size(store_target, root) == before  # nothing was written
    # The hold is the pair's: a third agent may still speak on the thread.
    ok(store_target.with_env(**GUARD_OFF), "reply", root, "--from", "c", "-b", "stop, both")


def test_a_group_send_on_a_held_thread_is_refused(store_target: StoreTarget) -> None:
    seed(store_target)
    root = held_thread(store_target)
    before = thread_size(store_target, root)
    words = held_error(root, "a|b").message
    env = store_target.env
    for to in ("@builders", "@all"):
        error = refused(env, "send", "--from", "a", "--to", to, "-s", "all", "-b", "hi",
                        "--thread", root)  # fmt: skip
        assert error == {"code": "loop_held", "message": words}
        error = refused(store_target.with_env(**GUARD_OFF), "send", "--from", "b", "--to", to,
                        "-s", "all", "-b", "hi", "--thread", root)  # fmt: skip
        assert error == {"code": "loop_held", "message": words}
    assert thread_size(store_target, root) == before
    # c's group send on the thread reaches a and b: neither pair with c is held.
    sent = ok(env, "send", "--from", "c", "--to", "@builders", "-s", "all", "-b", "hi",
              "--thread", root)  # fmt: skip
    assert sorted(sent["recipients"]) == ["a", "b"]


def test_a_sender_cannot_turn_off_the_repeat_collapse(store_target: StoreTarget) -> None:
    seed(store_target)
    first = ok(store_target.env, "send", "--from", "a", "--to", "b", "-s", "done", "-b", "same")
    again = ok(store_target.with_env(AGENTMAILD_LIMITS_DUPLICATE_WINDOW_S="0"),
               "send", "--from", "a", "--to", "b", "-s", "done", "-b", "same")  # fmt: skip
    assert again["duplicate"] is True and again["ids"] == first["ids"]
    assert len(ok(store_target.env, "list", "--to", "b")["messages"]) == 1


def test_a_sender_cannot_raise_the_content_limits(store_target: StoreTarget) -> None:
    seed(store_target)
    env = store_target.with_env(AGENTMAILD_LIMITS_BODY_MAX_BYTES="10000000",
                                AGENTMAILD_LIMITS_SUBJECT_MAX_CHARS="100000")  # fmt: skip
    error = refused(env, "send", "--from", "a", "--to", "b", "-s", "s", "-b", "x" * 70_000)
    assert error["code"] == "invalid" and "the limit is 65536" in error["message"]
    error = refused(env, "send", "--from", "a", "--to", "b", "-s", "s" * 300, "-b", "x")
    assert error["code"] == "invalid" and "the limit is 256" in error["message"]
    assert ok(store_target.env, "list", "--to", "b")["messages"] == []


def test_a_sender_cannot_lift_the_daemons_rate_limit(
    store_target: StoreTarget, tmp_path: Path
) -> None:
    seed(store_target)
    limited = store_target.with_env(AGENTMAILD_LIMITS_RATE_LIMIT_MAX="2")  # the daemon's own
    with daemon(store_target, tmp_path, limited):
        wait_for(lambda: store_rules(store_target)["written"], 30, "the daemon's team rules")
        assert store_rules(store_target)["rules"]["rate_limit_max"] == 2
        lifted = store_target.with_env(AGENTMAILD_LIMITS_RATE_LIMIT_MAX="0",
                                       AGENTMAILD_LIMITS_RATE_LIMIT_WINDOW_S="0.001")  # fmt: skip
        for i in range(2):
            ok(lifted, "send", "--from", "a", "--to", "b", "-s", f"s{i}", "-b", "b")
        error = refused(lifted, "send", "--from", "a", "--to", "b", "-s", "s2", "-b", "b")
        assert error["code"] == "rate_limited" and "(max 2)" in error["message"]
    assert len(ok(store_target.env, "list", "--to", "b")["messages"]) == 2


def test_the_daemons_config_reaches_the_store_at_start_and_on_reload(
    store_target: StoreTarget, tmp_path: Path
) -> None:
    seed(store_target)
    config = tmp_path / "daemon.toml"
    config.write_text("[limits]\npingpong_max = 5\n")
    shown = store_rules(store_target)
    assert shown["written"] is False and shown["rules"]["pingpong_max"] == 40  # built-in
    with daemon(store_target, tmp_path, store_target.with_env(AGENTMAILD_CONFIG=str(config))):
        wait_for(lambda: store_rules(store_target)["written"], 30, "the daemon's team rules")
        shown = store_rules(store_target)
        assert shown["rules"]["pingpong_max"] == 5 and shown["rules"]["rate_limit_max"] == 0
        config.write_text("[limits]\npingpong_max = 7\nrate_limit_max = 1\n")
        assert ok(store_target.env, "ctl", "reload")["result"]["reloaded"] is True
        shown = store_rules(store_target)
        assert shown["rules"]["pingpong_max"] == 7 and shown["rules"]["rate_limit_max"] == 1
        text = cli(store_target.env, "limits", "show").stdout.splitlines()
        assert text[0].startswith("team rules, as the store's daemon wrote them")
        assert "  pingpong_max         7" in text and "  rate_limit_max       1" in text
        ok(store_target.env, "send", "--from", "a", "--to", "b", "-s", "one", "-b", "b")
        error = refused(store_target.with_env(AGENTMAILD_LIMITS_RATE_LIMIT_MAX="0"),
                        "send", "--from", "a", "--to", "b", "-s", "two", "-b", "b")  # fmt: skip
        assert error["code"] == "rate_limited"
