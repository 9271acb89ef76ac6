#!/usr/bin/env python3
"""Stand-in for a stream-json CLI (`claude -p --output-format stream-json` shaped).

Usage: result_agent.py [--is-error] [--no-result] [--exit N] [--record FILE]
Reads one user line, prints system/init, replays the user line (same uuid), an assistant message
and a `result` event whose is_error is set by --is-error (omitted with --no-result), then exits N.
"""

import json
import sys
import uuid as uuidlib


def emit(event: dict) -> None:
    print(json.dumps(event), flush=True)


def main() -> int:
    flags = sys.argv[1:]
    code = int(flags[flags.index("--exit") + 1]) if "--exit" in flags else 0
    is_error = "--is-error" in flags
    line = sys.stdin.readline()
    event = json.loads(line)
    if "--record" in flags:
        with open(flags[flags.index("--record") + 1], "a", encoding="utf-8") as f:
            f.write(line)
    session = str(uuidlib.uuid4())
    emit({"type": "system", "subtype": "init", "session_id": session})
    emit({**event, "session_id": session})
    emit(
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            "session_id": session,
        }
    )
    if "--no-result" not in flags:
        emit(
            {
                "type": "result",
                "subtype": "error_during_execution" if is_error else "success",
                "is_error": is_error,
                "result": "API Error: 500 stand-in failure" if is_error else "done",
                "session_id": session,
            }
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
