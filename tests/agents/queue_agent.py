#!/usr/bin/env python3
"""Stand-in long-lived agent for a work queue (stdin channel): one turn per stdin line, forever.

Usage: queue_agent.py LEDGER. For each stream-json user line it appends one JSON line to LEDGER
— {"agent", "uuid" (the delivery id), "message_ids", "attempt", "t" (wall clock)} — in a single
O_APPEND write, then ends the turn as a stream-json CLI does: the user line replayed (same uuid)
and a successful result. EOF ends the process.
"""

import json
import os
import re
import sys
import time

MESSAGE = re.compile(r"^--- message \d+/\d+: (msg-[a-z0-9]+) ---$", re.MULTILINE)
REDELIVERY = re.compile(r"REDELIVERY \(attempt (\d+)\)")


def main() -> int:
    ledger = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    for line in sys.stdin:
        event = json.loads(line)
        text = event["message"]["content"][0]["text"]
        again = REDELIVERY.search(text)
        record = {
            "agent": os.environ.get("AGENTMAIL_AGENT"),
            "uuid": event.get("uuid"),
            "message_ids": MESSAGE.findall(text),
            "attempt": int(again.group(1)) if again else 1,
            "t": time.time(),
        }
        os.write(ledger, (json.dumps(record) + "\n").encode())
        replay = {"type": "user", "uuid": event.get("uuid"), "isReplay": True}
        result = {"type": "result", "subtype": "success", "is_error": False, "result": "done"}
        sys.stdout.write(json.dumps(replay) + "\n" + json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
