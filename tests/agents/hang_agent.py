#!/usr/bin/env python3
"""Stand-in agent CLI that reads its stdin line, then hangs.

Usage: hang_agent.py PID_FILE [--ignore-term] [--grandchild] [--chatty SECONDS]
Writes {"pid": ..., "grandchild": ...} to PID_FILE once the line was read (write-then-rename, so
a reader never sees half a file). --ignore-term: SIGTERM is ignored (by the grandchild too), so
only SIGKILL ends it. --grandchild: starts a sleeping grandchild in the same process group.
--chatty S: prints a line every S seconds while hanging (output, but never a result).
"""

import json
import os
import signal
import subprocess
import sys
import time


def main() -> int:
    pid_file = sys.argv[1]
    flags = sys.argv[2:]
    if "--ignore-term" in flags:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild
    grandchild = None
    if "--grandchild" in flags:
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time\nwhile True: time.sleep(60)"],
            stdin=subprocess.DEVNULL,
        ).pid
    sys.stdin.readline()
    tmp = pid_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "grandchild": grandchild}, f)
    os.replace(tmp, pid_file)
    chatty = float(flags[flags.index("--chatty") + 1]) if "--chatty" in flags else None
    while True:
        if chatty:
            print(json.dumps({"type": "system", "subtype": "heartbeat"}), flush=True)
        time.sleep(chatty or 3600)


if __name__ == "__main__":
    sys.exit(main())
