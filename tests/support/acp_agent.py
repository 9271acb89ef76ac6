"""A tiny scripted ACP agent (JSON-RPC 2.0 lines on stdio) for the acp channel's tests.

Env: ACP_RECORD (JSONL of every message received), ACP_SESSIONS (dir: one file per session, so a
restarted agent can ``session/load``), ACP_AUTH=1 (advertise gemini-api-key and demand
``authenticate`` before sessions), ACP_NO_LOAD=1 (no loadSession capability).
A prompt's text steers the turn: ``FAIL`` → JSON-RPC error 500; ``CRASH`` → exit 3 mid-turn;
``ASK`` → a ``session/request_permission`` to the client first (its answer recorded); ``REFUSE``
→ stopReason ``refusal``; ``SLOW`` → waits for the file ACP_GATE before answering.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

RECORD = Path(os.environ["ACP_RECORD"])
SESSIONS = Path(os.environ["ACP_SESSIONS"])
AUTH = os.environ.get("ACP_AUTH") == "1"
LOAD = os.environ.get("ACP_NO_LOAD") != "1"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def record(event: str, message: dict[str, Any]) -> None:
    with RECORD.open("a") as f:
        f.write(json.dumps({"event": event, "pid": os.getpid(), **message}) + "\n")


def read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    if not line:
        return None
    message: dict[str, Any] = json.loads(line)
    record("in", message)
    return message


def prompt(rid: Any, params: dict[str, Any]) -> None:
    session = SESSIONS / params["sessionId"]
    if not session.exists():
        send({"id": rid, "error": {"code": -32602, "message": "unknown session"}})
        return
    text = "".join(p.get("text", "") for p in params["prompt"])
    if "CRASH" in text:
        sys.exit(3)
    if "FAIL" in text:
        send({"id": rid, "error": {"code": 500, "message": "model API 500"}})
        return
    if "SLOW" in text:
        gate = Path(os.environ["ACP_GATE"])
        while not gate.exists():
            time.sleep(0.02)
    if "ASK" in text:
        send({"id": "perm-1", "method": "session/request_permission", "params": {}})
        answer = read()
        record("permission_answer", answer or {})
    with session.open("a") as f:
        f.write(json.dumps(text) + "\n")
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}}
    note = {"sessionId": params["sessionId"], "update": update}
    send({"method": "session/update", "params": note})
    stop = "refusal" if "REFUSE" in text else "end_turn"
    send({"id": rid, "result": {"stopReason": stop}})


def main() -> int:
    authed = not AUTH
    while (message := read()) is not None:
        rid, method, params = message.get("id"), message.get("method"), message.get("params", {})
        if method is None:
            continue  # a response to a request of ours outside ASK
        if method == "initialize":
            methods = [{"id": "gemini-api-key", "name": "key"}] if AUTH else []
            caps = {"loadSession": LOAD}
            send(
                {
                    "id": rid,
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": caps,
                        "authMethods": methods,
                    },
                }
            )
        elif method == "authenticate":
            authed = params.get("methodId") == "gemini-api-key"
            send({"id": rid, "result": {}})
        elif not authed:
            send({"id": rid, "error": {"code": -32000, "message": "Authentication required"}})
        elif method == "session/new":
            sid = uuid.uuid4().hex
            (SESSIONS / sid).write_text("")
            send({"id": rid, "result": {"sessionId": sid}})
        elif method == "session/load":
            if not (SESSIONS / params["sessionId"]).exists():
                send({"id": rid, "error": {"code": -32002, "message": "no such session"}})
            else:
                send({"id": rid, "result": {}})
        elif method == "session/prompt":
            prompt(rid, params)
        else:
            send({"id": rid, "error": {"code": -32601, "message": "method not found"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
