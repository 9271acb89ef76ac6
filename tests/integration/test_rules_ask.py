"""``agentmaild ask`` as a real process: woken by the daemon, or watching the store without one
(a SQLite file or a PostgreSQL database); exit 3 on a timeout with the question still
answerable; bad input is one line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import DaemonProc
from tests.support.store_targets import StoreTarget, ok
from tests.support.waiting import wait_for


def start_ask(db: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "agentmaild",
        "--json",
        "ask",
        "--db",
        str(db),
        "--from",
        "lead",
        "--to",
        "worker",
        "-s",
        "which port?",
        "-b",
        "for the API",
        *args,
    ]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def question_id(d: DaemonProc) -> str | None:
    found = json.loads(d.cli("--json", "list", "--to", "worker", "--type", "question").stdout)
    return found["messages"][0]["id"] if found["messages"] else None


def answer(d: DaemonProc, ask: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    wait_for(lambda: question_id(d), 30, "the question to be in the store")
    qid = question_id(d)
    assert qid is not None
    replied = d.cli("reply", qid, "--from", "worker", "-b", "8080")
    assert replied.returncode == 0, replied.stderr
    out, err = ask.communicate(timeout=30)
    assert ask.returncode == 0, err
    return json.loads(out), qid


def test_ask_under_a_daemon_is_woken_by_the_reply(
    daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    # A 60 s poll interval: only the reply's wake-up can end the wait in time.
    d = daemons({"AGENTMAILD_DAEMON_POLL_INTERVAL_S": "60", "AGENTMAILD_LOG_LEVEL": "debug"})
    d.cli("agents", "add", "lead", "-c", "lead")
    d.cli("agents", "add", "worker", "-c", "builder")
    ask = start_ask(d.db, d.env, "--timeout", "2m")
    wait_for(
        lambda: d.events("ask.waiting") or ask.poll() is not None, 30, "ask to wait on the daemon"
    )
    assert d.events("ask.waiting")[0]["agent"] == "lead"
    started = time.monotonic()
    result, qid = answer(d, ask)
    assert time.monotonic() - started < 20
    assert result["ok"] and result["question_id"] == qid
    assert result["reply"]["body"] == "8080" and result["reply"]["thread_id"] == qid
    # ask printed the reply, so it is read; the question itself went out as a `question`.
    shown = json.loads(d.cli("--json", "read", result["reply"]["id"]).stdout)["message"]
    assert shown["read"] is True
    assert json.loads(d.cli("--json", "read", qid).stdout)["message"]["type"] == "question"


def test_ask_without_a_daemon_watches_the_store(store_target: StoreTarget) -> None:
    env = store_target.env
    ok(env, "agents", "add", "lead", "-c", "lead")
    ok(env, "agents", "add", "worker", "-c", "builder")
    ask = subprocess.Popen(
        [sys.executable, "-m", "agentmaild", "--json", "ask", "--from", "lead", "--to", "worker",
         "-s", "which port?", "-b", "for the API", "--timeout", "60s"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def question() -> str | None:
        found = ok(env, "list", "--to", "worker", "--type", "question")["messages"]
        return str(found[0]["id"]) if found else None

    qid = wait_for(question, 30, "the question to be in the store")
    ok(env, "reply", qid, "--from", "worker", "-b", "8080")
    out, err = ask.communicate(timeout=60)
    assert ask.returncode == 0, err
    result = json.loads(out)
    assert result["question_id"] == qid and result["reply"]["body"] == "8080"
    assert result["reply"]["from"] == "worker"


def test_a_timeout_exits_3_and_the_question_stays_answerable(
    daemons: Callable[..., DaemonProc],
) -> None:
    d = daemons()
    d.cli("agents", "add", "lead", "-c", "lead")
    d.cli("agents", "add", "worker", "-c", "builder")
    timed_out = d.cli(
        "ask", "--from", "lead", "--to", "worker", "-s", "q", "-b", "?", "--timeout", "1s"
    )
    assert timed_out.returncode == 3
    assert timed_out.stdout == ""
    lines = timed_out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no reply to msg-")
    assert "the question stays open" in lines[0]
    qid = question_id(d)
    assert qid is not None
    assert d.cli("reply", qid, "--from", "worker", "-b", "late, but here").returncode == 0
    inbox = json.loads(d.cli("--json", "inbox", "--agent", "lead", "--unread").stdout)["messages"]
    assert [m["subject"] for m in inbox] == ["Re: q"]
    as_json = d.cli(
        "--json",
        "ask",
        "--from",
        "lead",
        "--to",
        "worker",
        "-s",
        "q2",
        "-b",
        "?",
        "--timeout",
        "0.5",
    )
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["error"]["code"] == "timeout"


def test_bad_input_is_one_line_and_writes_nothing(daemons: Callable[..., DaemonProc]) -> None:
    d = daemons(start=False)
    d.cli("agents", "add", "lead", "-c", "lead")
    for args, needle in (
        (["--to", "worker", "--timeout", "soon"], "--timeout"),
        (["--to", "nobody", "--timeout", "1s"], "unknown recipient"),
        (["--to", "worker", "--timeout", "0"], "--timeout"),
    ):
        done = d.cli("ask", "--from", "lead", "-s", "q", "-b", "?", *args)
        assert done.returncode == 1, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and needle in done.stderr
        assert "Traceback" not in done.stderr
    assert json.loads(d.cli("--json", "list").stdout)["messages"] == []


@pytest.mark.parametrize("with_daemon", [True, False], ids=["daemon", "store"])
def test_only_an_answer_to_the_asker_releases_it(
    daemons: Callable[..., DaemonProc], with_daemon: bool
) -> None:
    """A third party's message on the thread (to the worker) and the asker's own follow-up come
    first and leave ``ask`` waiting; the worker's answer then releases it, and is what it prints.
    Thread order is creation order, so a rule that took either of the first two would print it."""
    d = daemons(start=with_daemon)
    for name, capability in (("lead", "lead"), ("worker", "builder"), ("observer", "reviewer")):
        d.cli("agents", "add", name, "-c", capability)
    ask = start_ask(d.db, d.env, "--timeout", "2m")
    wait_for(lambda: question_id(d), 30, "the question to be in the store")
    qid = question_id(d)
    assert qid is not None
    aside = d.cli("send", "--from", "observer", "--to", "worker", "--thread", qid, "-s", "fyi",
                  "-b", "try 8081")  # fmt: skip
    assert aside.returncode == 0, aside.stderr
    follow = d.cli("reply", qid, "--from", "lead", "-b", "and which host?")
    assert follow.returncode == 0, follow.stderr
    thread = json.loads(d.cli("--json", "thread", qid).stdout)["messages"]
    assert [m["from"] for m in thread] == ["lead", "observer", "lead"]
    assert ask.poll() is None, "ask was released by mail that was not an answer to it"
    result, _ = answer(d, ask)
    assert (result["reply"]["from"], result["reply"]["to"]) == ("worker", "lead")
    assert result["reply"]["body"] == "8080"
