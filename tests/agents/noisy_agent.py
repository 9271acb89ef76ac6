#!/usr/bin/env python3
"""Stand-in agent CLI that floods its outputs, then succeeds.

Usage: noisy_agent.py MEGABYTES [--lines N] [--result]
Reads its stdin line, writes MEGABYTES of newline-free garbage (random bytes, not UTF-8) to
stdout, then absurdly nested and half-cut JSON, then N short lines to stdout and stderr,
optionally a stream-json result event, and exits 0.
"""

import json
import os
import sys


def main() -> int:
    megabytes = float(sys.argv[1])
    flags = sys.argv[2:]
    lines = int(flags[flags.index("--lines") + 1]) if "--lines" in flags else 10
    sys.stdin.readline()
    out = sys.stdout.buffer
    chunk = os.urandom(1 << 16).replace(b"\n", b"x")
    remaining = int(megabytes * (1 << 20))
    while remaining > 0:
        piece = chunk[: min(len(chunk), remaining)]
        out.write(piece)
        remaining -= len(piece)
    out.write(b"\n")
    out.write(b"[" * 200_000 + b"\n")  # JSON nested past any parser's recursion limit
    out.write(b'{"type": "result", "is_error": \n')  # a result event cut in half
    for n in range(lines):
        out.write(b"line %d of noise\n" % n)
        sys.stderr.write(f"stderr noise {n}\n")
    if "--result" in flags:
        out.write(json.dumps({"type": "result", "is_error": False}).encode() + b"\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
