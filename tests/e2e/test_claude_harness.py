"""Smoke tests for the real-Claude-Code harness: the pinned `claude` CLI against a loopback stub.

They pin down the CLI behaviour agentmaild's channels rely on (stream-json events, resume,
long-lived stdin mode, API errors, the TUI in tmux, hooks). Run with ``-s`` to see the event
sequences printed.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.anthropic_stub import AnthropicStub
from tests.support.claude_env import (
    BUSY_FOOTER,
    StreamJsonProcess,
    TmuxServer,
    claude_binary,
    claude_env,
    composer_idle,
    hook_recorder_settings,
    hook_records,
    isolated_home,
    run_print,
    session_file,
    user_line,
)
from tests.support.waiting import wait_for as wait_until

pytestmark = [
    pytest.mark.claude,
    pytest.mark.timeout(90),
]

REPLY = "ok from stub"


@dataclass
class Workspace:
    project: Path
    home: Path
    hooks: Path
    env: dict[str, str]


@pytest.fixture(scope="session")
def claude_bin() -> str:
    return claude_binary()


@pytest.fixture
def stub() -> Any:
    with AnthropicStub(REPLY) as s:
        yield s


@pytest.fixture
def ws(tmp_path: Path, stub: AnthropicStub) -> Workspace:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    hooks = tmp_path / "hooks"
    settings = hook_recorder_settings(hooks)
    (project / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
    home = isolated_home(tmp_path, project)
    return Workspace(project, home, hooks, claude_env(home, stub.base_url))


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """(type, subtype-or-state) per event: the shape of a stream."""
    return [(e.get("type", "?"), e.get("subtype") or e.get("state")) for e in events]


def lifecycle(events: list[dict[str, Any]], command_uuid: str) -> list[str]:
    return [
        e["state"]
        for e in events
        if e.get("type") == "command_lifecycle" and e.get("command_uuid") == command_uuid
    ]


# ---- (a) one turn, stdin closed --------------------------------------------------------------


def test_print_stream_json_single_turn(claude_bin: str, stub: AnthropicStub, ws: Workspace):
    session_id, line_id = str(uuid.uuid4()), str(uuid.uuid4())
    run = run_print(
        claude_bin,
        [user_line("hello MARKER", line_id)],
        env=ws.env,
        cwd=ws.project,
        extra_args=["--session-id", session_id],
    )
    print("(a) events:", summary(run.events), f"{run.elapsed:.1f}s")

    assert run.returncode == 0, run.stderr
    hook_events = [e for e in run.events if str(e.get("subtype", "")).startswith("hook_")]
    print("(a) hook events:", [json.dumps(e)[:400] for e in hook_events])
    # only SessionStart hooks surface in the stream without --include-hook-events
    assert {e["hook_event"] for e in hook_events} == {"SessionStart"}
    assert summary([e for e in run.events if e not in hook_events]) == [
        ("command_lifecycle", "queued"),
        ("command_lifecycle", "started"),
        ("system", "init"),
        ("user", None),
        ("assistant", None),
        ("result", "success"),
        ("command_lifecycle", "completed"),
    ]
    assert lifecycle(run.events, line_id) == ["queued", "started", "completed"]
    (init,) = run.of_type("system", "init")
    assert init["session_id"] == session_id
    assert init["cwd"] == str(ws.project)
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    assert init["claude_code_version"]
    (replayed,) = run.of_type("user")
    assert replayed["uuid"] == line_id
    assert replayed["isReplay"] is True
    (assistant,) = run.of_type("assistant")
    assert assistant["user_message_uuid"] == line_id
    assert run.result["is_error"] is False
    assert run.result["result"] == REPLY
    assert run.result["session_id"] == session_id
    assert all(e.get("session_id") == session_id for e in run.events)

    assert len(stub.conversation_requests("hello MARKER")) == 1
    request = stub.wait_for("hello MARKER", timeout=1)
    assert request.stream
    assert request.headers.get("x-api-key") == ws.env["ANTHROPIC_API_KEY"]

    # hooks from the project's .claude/settings.json run in -p mode too
    (start,) = hook_records(ws.hooks, "SessionStart")
    assert start["source"] == "startup"
    assert start["session_id"] == session_id
    (prompt,) = hook_records(ws.hooks, "UserPromptSubmit")
    assert prompt["prompt"] == "hello MARKER"
    assert prompt["session_id"] == session_id
    (stop,) = hook_records(ws.hooks, "Stop")
    assert stop["last_assistant_message"] == REPLY
    assert stop["stop_hook_active"] is False
    print(
        "(a) hooks:",
        {
            e: sorted(hook_records(ws.hooks, e)[0])
            for e in ("SessionStart", "UserPromptSubmit", "Stop")
        },
    )


def test_print_tool_use_runs_bash_and_tool_hooks(
    claude_bin: str,
    stub: AnthropicStub,
    ws: Workspace,
):
    def reply(body: dict[str, Any]) -> Any:
        last = body["messages"][-1] if body["messages"][-1]["role"] == "user" else {}
        blocks = last.get("content") if isinstance(last.get("content"), list) else []
        if any(b.get("type") == "tool_result" for b in blocks):
            return "tool done"
        return [
            {
                "type": "tool_use",
                "name": "Bash",
                "input": {"command": "echo TOOL-RAN", "description": "print a word"},
            }
        ]

    stub.reply = reply
    run = run_print(
        claude_bin,
        [user_line("run the tool MARKER-T")],
        env=ws.env,
        cwd=ws.project,
        extra_args=["--allowedTools", "Bash(echo:*)"],
    )
    print("(tool) events:", summary(run.events), f"{run.elapsed:.1f}s")

    assert run.returncode == 0, run.stderr
    assert run.result["is_error"] is False
    assert run.result["result"] == "tool done"
    assert run.result["num_turns"] == 2
    followup = [r for r in stub.messages_requests() if "TOOL-RAN" in r.last_user_text()]
    assert followup, "the tool_result never reached the API"
    (pre,) = hook_records(ws.hooks, "PreToolUse")
    (post,) = hook_records(ws.hooks, "PostToolUse")
    assert pre["tool_name"] == post["tool_name"] == "Bash"
    assert post["tool_input"]["command"] == "echo TOOL-RAN"
    assert "TOOL-RAN" in json.dumps(post["tool_response"])
    print("(tool) PostToolUse keys:", sorted(post),
          "tool_response:", json.dumps(post["tool_response"])[:400])


# ---- (b) --resume --------------------------------------------------------------------------


def test_print_resume_carries_history(claude_bin: str, stub: AnthropicStub, ws: Workspace):
    session_id = str(uuid.uuid4())
    first = run_print(
        claude_bin,
        [user_line("first turn MARKER-B1")],
        env=ws.env,
        cwd=ws.project,
        extra_args=["--session-id", session_id],
    )
    assert first.returncode == 0, first.stderr
    assert first.result["is_error"] is False

    stub.reply = "second reply"
    second_id = str(uuid.uuid4())
    second = run_print(
        claude_bin,
        [user_line("second turn MARKER-B2", second_id)],
        env=ws.env,
        cwd=ws.project,
        extra_args=["--resume", session_id],
    )
    print("(b) events:", summary(second.events), f"{second.elapsed:.1f}s")

    assert second.returncode == 0, second.stderr
    assert second.result["is_error"] is False
    assert second.result["result"] == "second reply"
    assert second.result["session_id"] == session_id  # --resume keeps the session id
    assert lifecycle(second.events, second_id) == ["queued", "started", "completed"]
    (request,) = stub.conversation_requests("MARKER-B2")
    history = request.all_text()
    assert "first turn MARKER-B1" in history
    assert REPLY in history
    assert [m["role"] for m in request.messages if m["role"] != "system"][:3] == [
        "user",
        "assistant",
        "user",
    ]
    resumed = [h for h in hook_records(ws.hooks, "SessionStart") if h["source"] == "resume"]
    assert resumed
    assert resumed[0]["session_id"] == session_id


# ---- (c) long-lived stdin ---------------------------------------------------------------------


def test_long_lived_stdin_one_result_per_line(
    claude_bin: str,
    stub: AnthropicStub,
    ws: Workspace,
):
    id1, id2 = str(uuid.uuid4()), str(uuid.uuid4())
    with StreamJsonProcess(claude_bin, env=ws.env, cwd=ws.project) as proc:
        proc.write(user_line("line one MARKER-C1", id1))
        turn1 = proc.read_until(lambda e: e.get("type") == "result")
        turn1 += proc.read_until(
            lambda e: e.get("type") == "command_lifecycle" and e.get("state") == "completed",
            timeout=10,
        )
        assert proc.proc.poll() is None, "exited although stdin is still open"

        proc.write(user_line("line two MARKER-C2", id2))
        turn2 = proc.read_until(
            lambda e: e.get("type") == "command_lifecycle" and e.get("state") == "completed"
        )
        proc.close_stdin()
        tail = proc.drain(timeout=20)
        rc = proc.wait(timeout=20)
    print("(c) turn1:", summary(turn1))
    print("(c) turn2:", summary(turn2))
    print("(c) after close:", summary(tail), "rc", rc)

    assert rc == 0, proc.stderr
    assert lifecycle(turn1, id1) == ["queued", "started", "completed"]
    assert lifecycle(turn2, id2) == ["queued", "started", "completed"]
    (result1,) = [e for e in turn1 if e["type"] == "result"]
    (result2,) = [e for e in turn2 if e["type"] == "result"]
    assert result1["is_error"] is False
    assert result2["is_error"] is False
    assert result1["session_id"] == result2["session_id"]
    assert [e["type"] for e in tail if e["type"] == "result"] == []
    (request2,) = stub.conversation_requests("MARKER-C2")
    assert "line one MARKER-C1" in request2.all_text()


def test_long_lived_stdin_line_written_while_busy_is_queued(
    claude_bin: str,
    stub: AnthropicStub,
    ws: Workspace,
):
    id1, id2 = str(uuid.uuid4()), str(uuid.uuid4())
    stub.hold("MARKER-Q1")
    with StreamJsonProcess(claude_bin, env=ws.env, cwd=ws.project) as proc:
        proc.write(user_line("busy turn MARKER-Q1", id1))
        stub.wait_for("MARKER-Q1")  # turn 1 is now in flight, held by the stub
        proc.write(user_line("queued line MARKER-Q2", id2))
        early = proc.read_until(
            lambda e: e.get("type") == "command_lifecycle" and e.get("command_uuid") == id2
        )
        assert not [e for e in early if e["type"] == "result"], "turn 1 ended while held"
        stub.release()
        rest = proc.read_until(
            lambda e: (
                e.get("type") == "command_lifecycle"
                and e.get("command_uuid") == id2
                and e.get("state") == "completed"
            )
        )
        proc.close_stdin()
        rc = proc.wait(timeout=20)
    events = early + rest
    print("(c2) while busy:", summary(events), "rc", rc)

    assert rc == 0
    assert lifecycle(events, id2)[0] == "queued"
    assert lifecycle(events, id1)[-1] == "completed"
    assert lifecycle(events, id2)[-1] == "completed"
    assert stub.conversation_requests("MARKER-Q2"), "queued line never reached the API"


# ---- (d) API errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(529, "overloaded_error"), (500, "api_error"), (400, "invalid_request_error")],
)
def test_print_api_error_is_error_result(
    claude_bin: str,
    stub: AnthropicStub,
    ws: Workspace,
    status: int,
    error_type: str,
):
    stub.fail_next(20, status=status)
    line_id = str(uuid.uuid4())
    run = run_print(
        claude_bin, [user_line("this will fail MARKER-D", line_id)], env=ws.env, cwd=ws.project
    )  # CLAUDE_CODE_MAX_RETRIES=0 from claude_env
    print(
        f"(d) {status}:",
        summary(run.events),
        "rc",
        run.returncode,
        f"{run.elapsed:.1f}s",
        "requests",
        len(stub.messages_requests()),
    )

    assert run.returncode == 1
    result = run.result
    assert result["is_error"] is True
    assert result["subtype"] == "success"  # sic: the error shows in is_error, not subtype
    assert result["api_error_status"] == status
    assert result["terminal_reason"] == "api_error"
    assert f"API Error: {status}" in result["result"]
    assert error_type in result["result"]
    assert lifecycle(run.events, line_id) == ["queued", "started", "cancelled"]
    assert all(r.answered_with == status for r in stub.messages_requests())


def test_print_transient_errors_are_retried(claude_bin: str, stub: AnthropicStub, ws: Workspace):
    stub.fail_next(2, status=529)
    env = dict(ws.env, CLAUDE_CODE_MAX_RETRIES="2")
    run = run_print(claude_bin, [user_line("retry me MARKER-R")], env=env, cwd=ws.project)
    print("(d2) events:", summary(run.events), f"{run.elapsed:.1f}s")

    assert run.returncode == 0, run.stderr
    retries = run.of_type("system", "api_retry")
    assert [r["attempt"] for r in retries] == [1, 2]
    assert all(r["error_status"] == 529 and r["max_retries"] == 2 for r in retries)
    assert run.result["is_error"] is False
    assert run.result["result"] == REPLY
    assert [r.answered_with for r in stub.conversation_requests("MARKER-R")] == [529, 529, 200]


# ---- (e) interactive TUI in tmux ----------------------------------------------------------------


@pytest.mark.tmux
def test_tui_in_tmux_paste_submit_busy_idle(claude_bin: str, stub: AnthropicStub, ws: Workspace):
    with TmuxServer(ws.env) as tmux:
        target = tmux.new_session("agent", [claude_bin], cwd=ws.project)
        pid = tmux.pane_pid(target)

        idle_screen = wait_until(
            lambda: (s := tmux.capture(target)) and composer_idle(s) and s,
            timeout=30,
            what="idle composer",
        )
        print("(e) idle screen:\n" + idle_screen.rstrip())
        # the file appears first without "status"; it is added a moment later
        idle_file = wait_until(
            lambda: (f := session_file(ws.home, pid)) and "status" in f and f,
            20,
            what="session file with status",
        )
        assert idle_file["status"] == "idle"
        assert idle_file["pid"] == pid
        assert idle_file["kind"] == "interactive"
        (start,) = wait_until(
            lambda: hook_records(ws.hooks, "SessionStart"), 20, what="SessionStart hook"
        )
        assert start["session_id"] == idle_file["sessionId"]

        stub.hold("MARKER-E")
        tmux.paste(target, "hello from tmux MARKER-E")
        wait_until(lambda: "MARKER-E" in tmux.capture(target), 20, what="pasted text shown")
        tmux.send_keys(target, "Enter")
        stub.wait_for("MARKER-E", timeout=20)

        busy_screen = wait_until(
            lambda: (s := tmux.capture(target)) and BUSY_FOOTER in s and s,
            timeout=10,
            what="busy footer",
        )
        print("(e) busy screen:\n" + busy_screen.rstrip())
        busy_file = wait_until(
            lambda: (f := session_file(ws.home, pid)) and f.get("status") == "busy" and f,
            20,
            what="status busy",
        )
        (prompt,) = hook_records(ws.hooks, "UserPromptSubmit")
        assert prompt["prompt"] == "hello from tmux MARKER-E"
        assert prompt["session_id"] == busy_file["sessionId"]
        assert not composer_idle(busy_screen)

        stub.release()
        done_screen = wait_until(
            lambda: (s := tmux.capture(target)) and composer_idle(s) and REPLY in s and s,
            timeout=20,
            what="turn finished",
        )
        print("(e) after turn:\n" + done_screen.rstrip())
        wait_until(
            lambda: (f := session_file(ws.home, pid)) and f.get("status") == "idle",
            20,
            what="status idle",
        )
        (stop,) = wait_until(lambda: hook_records(ws.hooks, "Stop"), 20, what="Stop hook")
        assert stop["last_assistant_message"] == REPLY
        print("(e) session file:", json.dumps(session_file(ws.home, pid)))
        print(
            "(e) hooks:",
            json.dumps(
                {e: hook_records(ws.hooks, e) for e in ("SessionStart", "UserPromptSubmit", "Stop")}
            )[:1500],
        )
