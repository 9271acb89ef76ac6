#!/usr/bin/env python3
"""Stand-in agent CLI for interrupts: records its turn, then holds a "long" one for 5 minutes.

Usage: long_turn_agent.py RECORD_FILE [SESSION]
Appends {"text", "pid", "pgid", "session", "started"} to RECORD_FILE once the stream-json user
line was read. A turn whose text says LONG and is not a REDELIVERY sleeps 300 s (a grandchild
in its process group sleeps too); any other turn exits 0 at once. SIGINT ends it (exit 130),
as a CLI's own "stop this turn" does, unless the text says STUBBORN: then only SIGTERM does.
"""

import json
import os
import signal
import subprocess
import sys
import time


def main() -> int:
    path = sys.argv[1]
    session = sys.argv[2] if len(sys.argv) > 2 else None
    line = sys.stdin.readline()
    event = json.loads(line) if line.strip() else {}
    text = event.get("message", {}).get("content", [{}])[0].get("text", "")
    hold = "LONG" in text and "REDELIVERY" not in text
    helper = None
    if hold and "STUBBORN" in text:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hold:
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]).pid
    record = {"text": text, "pid": os.getpid(), "pgid": os.getpgid(0), "session": session,
              "helper": helper, "started": time.time()}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    if hold:
        try:
            time.sleep(300)
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
