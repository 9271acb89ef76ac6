"""Issue 16 item 3 (and the hook side of item 2): the real CLI in an Overstory project.

Every command runs as a child process in the project directory, without ``--db``: the store is
found the way Overstory finds it (``.overstory/mail.db``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.overstory import OverstoryProject

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ov(tmp_path: Path) -> OverstoryProject:
    project = OverstoryProject(tmp_path / "proj")
    project.session("lead-1", "lead")
    project.session("ov-builder-9", "builder", parent="lead-1")
    project.session("Builder 1", "builder", parent="lead-1")
    return project


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("AGENTMAIL", "CLAUDE"))}  # fmt: skip
    clean.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"),
                 XDG_STATE_HOME=str(tmp_path / "state"), PYTHONIOENCODING="utf-8")  # fmt: skip
    return clean


def run(ov: OverstoryProject, env: dict[str, str], *args: str, stdin: str = "",
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([sys.executable, "-m", "agentmaild", *args], input=stdin, text=True,
                          capture_output=True, env=env, cwd=cwd or ov.root, timeout=60)  # fmt: skip


def ok(ov: OverstoryProject, env: dict[str, str], *args: str) -> Any:
    done = run(ov, env, *args, "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def test_the_default_store_is_overstorys_unless_ours_exists(
    ov: OverstoryProject, env: dict[str, str]
) -> None:
    ok(ov, env, "send", "--to", "ov-builder-9", "-s", "hi")
    assert ov.unread("ov-builder-9") != []
    (ov.root / ".agentmail").mkdir()
    ok(ov, env, "send", "--to", "operator", "-s", "ours")
    assert (ov.root / ".agentmail" / "mail.db").exists()


def test_agent_flag_and_orchestrator_identity_match_ov_mail(
    ov: OverstoryProject, env: dict[str, str]
) -> None:
    sent = ok(ov, env, "send", "--to", "ov-builder-9", "-s", "task")  # from orchestrator
    mid = sent["ids"][0]
    reply = ok(ov, env, "reply", mid, "--agent", "ov-builder-9", "--body", "done")
    assert ov.check("orchestrator") == reply["ids"]  # a plain `ov mail check` sees the reply
    by_agent = ok(ov, env, "send", "--agent", "lead-1", "--to", "ov-builder-9", "-s", "x")
    listed = ok(ov, env, "list", "--agent", "ov-builder-9")
    assert {m["from"] for m in listed["messages"]} == {"orchestrator", "lead-1"}
    assert by_agent["ids"][0] in {m["id"] for m in listed["messages"]}


def test_check_without_an_agent_reads_orchestrators_mail(
    ov: OverstoryProject, env: dict[str, str]
) -> None:
    first = ov.send("orchestrator", "one", sender="lead-1")
    data = ok(ov, env, "check")
    assert [m["id"] for m in data["messages"]] == first
    ov.send("orchestrator", "two", sender="lead-1", priority="urgent")
    done = run(ov, env, "check", "--inject")  # the hot path
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('PRIORITY: urgent priority message from lead-1 — "two"')
    assert ov.marker("orchestrator") is None


def test_overstory_names_work_for_addressing_reading_and_purge(
    ov: OverstoryProject, env: dict[str, str], tmp_path: Path
) -> None:
    ok(ov, env, "send", "--agent", "Lead", "--to", "Builder 1", "-s", "hello")
    inbox = ok(ov, env, "inbox", "--agent", "Builder 1")
    assert [m["from"] for m in inbox["messages"]] == ["Lead"]
    assert ok(ov, env, "check", "--agent", "Builder 1")["messages"][0]["subject"] == "hello"
    assert ok(ov, env, "purge", "--agent", "Lead")["deleted"] == 1
    bad = run(ov, env, "purge", "--agent", "../etc")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "invalid" in bad.stderr
    # Outside Overstory mode our stricter rule stands.
    plain = run(ov, env, "--db", str(tmp_path / "plain.db"), "send", "--to", "Lead", "-s", "x")
    assert plain.returncode == 1 and "invalid recipient" in plain.stderr


def test_registering_an_agent_overstory_knows_adopts_its_identity(
    ov: OverstoryProject, env: dict[str, str]
) -> None:
    added = ok(ov, env, "agents", "add", "ov-builder-9")
    assert (added["agent"]["capability"], added["agent"]["parent"]) == ("builder", "lead-1")
    clash = run(ov, env, "agents", "add", "Builder 1", "--capability", "scout")
    assert clash.returncode == 1 and clash.stderr.startswith("error: capability: Builder 1 is a")
    missing = run(ov, env, "agents", "add", "am-new")
    assert missing.returncode == 2 and "--capability is required" in missing.stderr


def test_the_prompt_hook_shows_and_clears_overstorys_banner(
    ov: OverstoryProject, env: dict[str, str]
) -> None:
    ov.send("Builder 1", "merge now", sender="lead-1", type="merge_ready", priority="normal")
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "go",
                          "session_id": "s-1"})  # fmt: skip
    done = run(ov, env, "hook", "user-prompt-submit", "--agent", "Builder 1", stdin=payload)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('PRIORITY: merge_ready message from lead-1 — "merge now"')
    assert "[agentmail] 1 new message for Builder 1" in done.stdout
    assert ov.marker("Builder 1") is None and ov.unread("Builder 1") == []
