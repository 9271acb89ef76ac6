#!/usr/bin/env python3
"""Stand-in agent CLI that writes to its log: reads one stream-json user line, prints
``wrote-at <unix seconds>`` and the line's text (the mail as delivered) to stdout, exits 0.

The daemon keeps a spawn agent's output in its log (``agentmaild logs``); the dashboard's agent
page tails that file, and a test compares the stamp with when the page showed the line.
"""

import json
import sys
import time


def main() -> int:
    line = sys.stdin.readline()
    event = json.loads(line) if line.strip() else {}
    content = event.get("message", {}).get("content", [{}])
    text = content[0].get("text", "") if content else ""
    sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.write(f"wrote-at {time.time():.3f}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
