#!/usr/bin/env python3
"""Stand-in agent CLI that fails N times, then succeeds.

Usage: flaky_agent.py COUNTER_FILE N. Each run reads stdin, bumps the integer in COUNTER_FILE and
exits 1 while the count is <= N, else 0. Each run's uuid is appended to COUNTER_FILE + ".log".
"""

import json
import sys


def main() -> int:
    counter, failures = sys.argv[1], int(sys.argv[2])
    line = sys.stdin.readline()
    try:
        with open(counter, encoding="utf-8") as f:
            count = int(f.read().strip() or 0)
    except FileNotFoundError:
        count = 0
    count += 1
    with open(counter, "w", encoding="utf-8") as f:
        f.write(str(count))
    uuid = json.loads(line).get("uuid") if line.strip() else None
    with open(counter + ".log", "a", encoding="utf-8") as f:
        f.write(json.dumps({"run": count, "uuid": uuid}) + "\n")
    if count <= failures:
        print(f"flaky_agent: failing run {count} of {failures}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
