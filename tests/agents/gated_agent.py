#!/usr/bin/env python3
"""Stand-in agent CLI whose turn lasts until a gate file exists.

Usage: gated_agent.py RECORD_FILE GATE_FILE [--exit N [--exit-unless OK_FILE]]. Reads the
stream-json line, appends {"uuid", "text", "pid", "phase": "started"} to RECORD_FILE, waits (up to
60 s) for GATE_FILE to exist, appends the same record with "phase": "done", exits N (default 0;
with ``--exit-unless``, 0 once OK_FILE exists).
"""

import json
import os
import sys
import time


def record(path: str, event: dict, phase: str) -> None:
    content = event.get("message", {}).get("content", [{}])
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"uuid": event.get("uuid"), "text": content[0].get("text"),
                            "pid": os.getpid(), "phase": phase}) + "\n")


def main() -> int:
    path, gate = sys.argv[1], sys.argv[2]
    code = int(sys.argv[sys.argv.index("--exit") + 1]) if "--exit" in sys.argv else 0
    ok = sys.argv[sys.argv.index("--exit-unless") + 1] if "--exit-unless" in sys.argv else None
    line = sys.stdin.readline()
    event = json.loads(line) if line.strip() else {}
    record(path, event, "started")
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    record(path, event, "done")
    return 0 if ok is not None and os.path.exists(ok) else code


if __name__ == "__main__":
    sys.exit(main())
