#!/usr/bin/env python3
"""A scripted stand-in for ``claude -p --input-format stream-json --output-format stream-json
--verbose --replay-user-messages`` (stdlib only). One loop serves both modes: each stdin line is
one turn; EOF ends the process (one-shot ``-p`` = stdin closed after one line).

Per turn, like Claude Code 2.1.332: command_lifecycle queued/started (command_uuid = the line's
uuid), system/init (session_id), the user line replayed (same uuid, isReplay), an assistant
message, a result (is_error, usage, total_cost_usd), command_lifecycle completed/cancelled. Exit 1
when the last turn failed, as the real CLI does.

Sessions live in ``$HOME/.fake-claude/<id>.jsonl`` (one line per turn): ``--resume`` of an unknown
id fails like the real CLI ("No conversation found"), ``--session-id`` of a known one fails with
"already in use". While running it holds ``$HOME/.claude/sessions/<pid>.json``.

Failure modes, per turn: ``FAKE_CLAUDE_MODE`` (every turn) or the file ``FAKE_CLAUDE_MODE_FILE``
(read and deleted: one turn only), comma-separated:
  exit:N      exit N right after the turn's events     is_error   result is_error true
  hang        stop talking, never exit                 crash      exit 3 after "started"
  garbage     non-JSON and binary lines first          huge       a 6 MB line and 20k short lines
  no_lifecycle / no_replay   omit those events       gate:PATH  wait until PATH exists first
  heartbeat:S while gated, print a status line every S seconds
Every start and every line received is appended as JSON to ``FAKE_CLAUDE_RECORD`` (if set).
"""

import json
import os
import sys
import time
import uuid

ENV_KEYS_PREFIXES = ("AGENTMAIL_", "CLAUDE", "HOME", "ANTHROPIC_")


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def record(entry: dict) -> None:
    path = os.environ.get("FAKE_CLAUDE_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def flag(argv: list, name: str):
    return argv[argv.index(name) + 1] if name in argv else None


def modes() -> list:
    found = [m for m in os.environ.get("FAKE_CLAUDE_MODE", "").split(",") if m]
    once = os.environ.get("FAKE_CLAUDE_MODE_FILE")
    if once and os.path.exists(once):
        with open(once, encoding="utf-8") as f:
            found += [m for m in f.read().strip().split(",") if m]
        os.unlink(once)
    return found


def option(found: list, name: str):
    for m in found:
        if m == name or m.startswith(name + ":"):
            return m.partition(":")[2] or True
    return None


class Session:
    def __init__(self, argv: list) -> None:
        home = os.environ.get("HOME", ".")
        self.dir = os.path.join(home, ".fake-claude")
        os.makedirs(self.dir, exist_ok=True)
        resume, chosen = flag(argv, "--resume"), flag(argv, "--session-id")
        self.id = resume or chosen or str(uuid.uuid4())
        exists = os.path.exists(self.path)
        if resume and not exists:
            emit(
                {
                    "type": "result",
                    "subtype": "error_during_execution",
                    "is_error": True,
                    "result": None,
                    "session_id": self.id,
                }
            )
            sys.stderr.write(f"No conversation found with session ID: {self.id}\n")
            sys.exit(1)
        if chosen and exists:
            sys.stderr.write(f"Error: Session ID {self.id} is already in use.\n")
            sys.exit(1)
        self.holder = os.path.join(home, ".claude", "sessions", f"{os.getpid()}.json")
        os.makedirs(os.path.dirname(self.holder), exist_ok=True)
        with open(self.holder, "w", encoding="utf-8") as f:
            json.dump({"pid": os.getpid(), "sessionId": self.id, "kind": "interactive"}, f)

    @property
    def path(self) -> str:
        return os.path.join(self.dir, f"{self.id}.jsonl")

    def history(self) -> list:
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def append(self, text: str, line_uuid: str) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"uuid": line_uuid, "text": text}) + "\n")

    def release(self) -> None:
        try:
            os.unlink(self.holder)
        except OSError:
            pass


def wait_gate(path: str, heartbeat) -> None:
    last = time.monotonic()
    while not os.path.exists(path):
        time.sleep(0.01)
        if heartbeat and time.monotonic() - last >= float(heartbeat):
            emit({"type": "system", "subtype": "status", "status": "thinking"})
            last = time.monotonic()


def misbehave(found: list) -> None:
    if option(found, "garbage"):
        sys.stdout.write('this is not json\n{"half": \n')
        sys.stdout.buffer.write(b"\xff\xfe\x00binary\n")
        sys.stdout.flush()
    if option(found, "huge"):
        sys.stdout.write("x" * (6 * 1024 * 1024) + "\n")
        sys.stdout.write("".join(f"line {i}\n" for i in range(20000)))
        sys.stdout.flush()
    if option(found, "hang"):
        while True:
            time.sleep(3600)


def turn(session: Session, line: bytes) -> bool:
    """One turn; True when it succeeded."""
    found = modes()
    try:
        message = json.loads(line)
    except ValueError:
        record({"event": "unparsed", "line": line.decode("utf-8", "replace")[:200]})
        return False
    line_uuid = message.get("uuid") or str(uuid.uuid4())
    text = "".join(b.get("text", "") for b in message["message"]["content"])
    record(
        {
            "event": "line",
            "uuid": line_uuid,
            "text": text,
            "session": session.id,
            "history": len(session.history()),
            "pid": os.getpid(),
            "modes": found,
        }
    )
    lifecycle = not option(found, "no_lifecycle")
    if any(h["uuid"] == line_uuid for h in session.history()):
        # like Claude Code: a uuid already in the transcript is not run again
        emit({**message, "session_id": session.id, "isReplay": True})
        emit(
            {
                "type": "command_lifecycle",
                "command_uuid": line_uuid,
                "state": "completed",
                "uuid": str(uuid.uuid4()),
                "session_id": session.id,
            }
        )
        return True

    def state(name: str) -> None:
        if lifecycle:
            emit(
                {
                    "type": "command_lifecycle",
                    "command_uuid": line_uuid,
                    "state": name,
                    "uuid": str(uuid.uuid4()),
                    "session_id": session.id,
                }
            )

    state("queued")
    if option(found, "gate"):
        wait_gate(option(found, "gate"), option(found, "heartbeat"))
    state("started")
    if option(found, "crash"):
        os._exit(3)
    emit({"type": "system", "subtype": "init", "session_id": session.id, "cwd": os.getcwd()})
    if not option(found, "no_replay"):
        emit({**message, "session_id": session.id, "isReplay": True})
    session.append(text, line_uuid)  # recorded even when the turn then fails, as Claude does
    misbehave(found)
    failed = bool(option(found, "is_error"))
    emit(
        {
            "type": "assistant",
            "session_id": session.id,
            "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        }
    )
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": failed,
            "session_id": session.id,
            "result": "API Error: 500 stand-in failure" if failed else f"seen {text[:40]}",
            # As Claude Code reports them: this turn's tokens and its price
            # (FAKE_CLAUDE_COST_USD sets the price, for the budget tests).
            "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 3, "output_tokens": 7},
            "total_cost_usd": float(os.environ.get("FAKE_CLAUDE_COST_USD", "0.0042")),
        }
    )
    state("cancelled" if failed else "completed")
    code = option(found, "exit")
    if code:
        session.release()
        sys.exit(int(code))
    return not failed


def main() -> int:
    argv = sys.argv[1:]
    record(
        {
            "event": "start",
            "argv": argv,
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "env": {k: v for k, v in os.environ.items() if k.startswith(ENV_KEYS_PREFIXES)},
        }
    )
    session = Session(argv)
    ok = True
    try:
        for line in sys.stdin.buffer:
            if line.strip():
                ok = turn(session, line)
    finally:
        session.release()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
