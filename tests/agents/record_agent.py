#!/usr/bin/env python3
"""Stand-in agent CLI: reads one stream-json user line, records it, exits 0.

The record (one JSON object per line) goes to $RECORD_FILE, or argv[1] when given. It holds the
line's uuid and text, the AGENTMAIL_* environment, whether CLAUDECODE/CLAUDE_CODE_* leaked in, the
argv, cwd and pid. Options after the record path: --exit N (exit code), --pid-file PATH.
"""

import json
import os
import sys


def main() -> int:
    args = sys.argv[1:]
    path = args[0] if args and not args[0].startswith("--") else os.environ["RECORD_FILE"]
    code = int(args[args.index("--exit") + 1]) if "--exit" in args else 0
    line = sys.stdin.readline()
    event = json.loads(line) if line.strip() else {}
    content = event.get("message", {}).get("content", [{}])
    record = {
        "uuid": event.get("uuid"),
        "text": content[0].get("text") if content else None,
        "event": event,
        "env": {k: v for k, v in os.environ.items() if k.startswith("AGENTMAIL_")},
        "claude_env": sorted(
            k for k in os.environ if k == "CLAUDECODE" or k.startswith("CLAUDE_CODE_")
        ),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "rest_of_stdin": sys.stdin.read(),
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
