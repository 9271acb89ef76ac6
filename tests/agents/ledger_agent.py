#!/usr/bin/env python3
"""Stand-in agent CLI that keeps a ledger of what it was given, for the history checker.

Usage: ledger_agent.py LEDGER_FILE. Reads one stream-json user line and appends one JSON line to
LEDGER_FILE: {"uuid": delivery id, "message_ids": [...], "attempt": N, "pid": ...}, parsed from
the rendered batch (`--- message i/n: msg-… ---`, `REDELIVERY (attempt N)`), in a single
O_APPEND write so concurrent writers never interleave. A line that is not a whole JSON object
(the daemon died while writing it) is not recorded and the turn exits 2. Otherwise exits 0.
"""

import json
import os
import re
import sys

MESSAGE = re.compile(r"^--- message \d+/\d+: (msg-[a-z0-9]+) ---$", re.MULTILINE)
REDELIVERY = re.compile(r"REDELIVERY \(attempt (\d+)\)")


def main() -> int:
    line = sys.stdin.readline()
    try:
        event = json.loads(line)
        text = event["message"]["content"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        return 2
    again = REDELIVERY.search(text)
    record = {
        "uuid": event.get("uuid"),
        "message_ids": MESSAGE.findall(text),
        "attempt": int(again.group(1)) if again else 1,
        "pid": os.getpid(),
    }
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
