"""``agentmaild demo`` as a person runs it: a real subprocess starts its own daemon and three
scripted agents, mail goes planner → coder → reviewer → planner and each batch is acked, the
dashboard URL answers; Ctrl-C (SIGINT) or SIGTERM leaves no process and no directory behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.cookiejar import CookieJar
from pathlib import Path

import pytest

from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import base_env
from tests.support.waiting import alive, wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``start(*args)`` → a running ``agentmaild demo``; one a failed test left is interrupted
    (its own cleanup), then killed."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        env = base_env(tmp_path, {"TMPDIR": str(tmp_path)})
        argv = [sys.executable, "-m", "agentmaild", "demo", *args]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _lines(proc: subprocess.Popen[str]) -> list[str]:
    """stdout's lines as they come (a thread reads them; the list grows)."""
    got: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            got.append(line.rstrip("\n"))  # noqa: PERF401 - one by one, as they come

    threading.Thread(target=read, daemon=True).start()
    return got


def _left_behind(directory: str) -> list[str]:
    """Processes whose command line or working directory names ``directory``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue  # ended meanwhile, or not ours to look at
        if directory in cmdline or cwd.startswith(directory):
            found.append(f"{pid}: {cmdline}")
    return found


def _acked_between_all_three(db: str) -> bool:
    store = SqliteMailStore(db, readonly=True)
    try:
        acked = {a.agent for a in store.list_attempts(limit=None) if a.outcome == "acked"}
        read = {(m.from_agent, m.to_agent) for m in store.list_messages() if m.read}
    finally:
        store.close()
    chain = {("operator", "planner"), ("planner", "coder"), ("coder", "reviewer"),
             ("reviewer", "planner")}  # fmt: skip
    return acked == {"planner", "coder", "reviewer"} and chain <= read


def test_demo_delivers_between_three_agents_and_ctrl_c_leaves_nothing(
    tmp_path: Path, demo: Callable[..., subprocess.Popen[str]]
) -> None:
    proc = demo("--json", "--every", "1")
    lines = _lines(proc)
    wait_for(lambda: lines, 60, "the demo's JSON object")
    info = json.loads(lines[0])
    assert info["ok"] is True and info["agents"] == ["planner", "coder", "reviewer"]
    team = info["dir"]
    assert Path(team).parent == tmp_path and Path(info["db"]).is_file()
    wait_for(lambda: _acked_between_all_three(info["db"]), 60, "mail acked by all three agents")
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    with browser.open(info["url"], timeout=10) as answer:  # its token becomes a cookie
        assert answer.status == 200 and b"<html" in answer.read().lower()
    assert alive(info["daemon_pid"]) and _left_behind(team)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    assert not Path(team).exists()
    assert not alive(info["daemon_pid"])
    assert _left_behind(team) == []
    assert len(lines) == 1  # --json: the one object, no event lines


def test_demo_prints_the_flow_and_sigterm_cleans_up(
    demo: Callable[..., subprocess.Popen[str]],
) -> None:
    proc = demo("--every", "1")
    lines = _lines(proc)
    wait_for(lambda: any("to reviewer, acked" in line for line in lines), 60, "a reviewer ack")
    text = "\n".join(lines)
    url = next(line.split()[1] for line in lines if line.strip().startswith("dashboard"))
    assert url.startswith("http://127.0.0.1:")
    db = next(line.split()[1] for line in lines if line.strip().startswith("store"))
    team = str(Path(db).parents[1])
    assert "operator → planner: 'task 1: " in text and "coder → reviewer: 'review 1: " in text
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    wait_for(lambda: any(line.startswith("stopped:") for line in lines), 10, "the stop line")
    assert f"{team} removed" in lines[-1]
    assert not Path(team).exists() and _left_behind(team) == []


def test_demo_for_seconds_ends_on_its_own(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agentmaild", "demo", "--for", "2", "--json"],
                          env=base_env(tmp_path, {"TMPDIR": str(tmp_path)}), capture_output=True,
                          text=True, timeout=90, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert not Path(info["dir"]).exists() and _left_behind(info["dir"]) == []
    assert list(tmp_path.glob("agentmaild-demo-*")) == []


def test_a_demo_that_cannot_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    env = base_env(tmp_path, {"TMPDIR": str(tmp_path), "AGENTMAILD_DAEMON_POLL_INTERVAL_S": "-1"})
    done = subprocess.run([sys.executable, "-m", "agentmaild", "demo", "--for", "2"], env=env,
                          capture_output=True, text=True, timeout=90, check=False)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("error: daemon.poll_interval_s: must be > 0")
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert list(tmp_path.glob("agentmaild-demo-*")) == []
