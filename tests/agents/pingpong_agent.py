#!/usr/bin/env python3
"""Stand-in agent that answers every message it gets, forever: half of a reply loop.

Reads one stream-json user line (a spawn channel's batch), replies to each message in it with the
real CLI (``python -m agentmaild reply ID``; sender and store come from AGENTMAIL_AGENT and
AGENTMAIL_DB, as for any agent), and appends one JSON line per reply to argv[1]: the message id,
the CLI's exit code and its output. It always exits 0: a refused reply is the guard working.
"""

import json
import re
import subprocess
import sys
import uuid


def main() -> int:
    record = sys.argv[1]
    event = json.loads(sys.stdin.readline() or "{}")
    text = event.get("message", {}).get("content", [{}])[0].get("text", "")
    for message_id in re.findall(r"^reply: agentmaild reply (msg-[a-z0-9]+)", text, re.M):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentmaild",
                "--json",
                "reply",
                message_id,
                "--body",
                f"and again ({uuid.uuid4().hex[:8]})",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        with open(record, "a", encoding="utf-8") as f:
            f.write(
                json.dumps({"id": message_id, "rc": done.returncode, "out": done.stdout}) + "\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
