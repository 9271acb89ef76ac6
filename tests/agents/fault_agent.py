#!/usr/bin/env python3
"""Stand-in agent CLI that fails in one chosen way, for the fault matrix.

Usage: fault_agent.py MODE LEDGER_FILE. Reads its stream-json line, appends {"uuid", "mode",
"pid"} to LEDGER_FILE (one O_APPEND write), then:
  exit     exits 3
  hang     prints nothing and sleeps (the channel's stall timeout must kill it)
  crash    SIGKILLs itself mid-turn
  garbage  writes binary junk and broken JSON to stdout, no result event, exits 0
"""

import json
import os
import signal
import sys
import time


def main() -> int:
    mode, ledger = sys.argv[1], sys.argv[2]
    line = sys.stdin.readline()
    try:
        uuid = json.loads(line).get("uuid")
    except ValueError:
        uuid = None
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps({"uuid": uuid, "mode": mode, "pid": os.getpid()}) + "\n").encode())
    os.close(fd)
    if mode == "exit":
        return 3
    if mode == "hang":
        while True:
            time.sleep(3600)
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "garbage":
        out = sys.stdout.buffer
        out.write(os.urandom(4096).replace(b"\n", b"?") + b"\n")
        out.write(b'{"type": "result", "is_error": fal\n')
        out.write(b"\xff\xfe not utf-8 \x00\n")
        out.flush()
        return 0
    return 64


if __name__ == "__main__":
    sys.exit(main())
