#!/usr/bin/env python3
"""Stand-in agent CLI whose descendant escapes its process group (setsid and a double fork).

Usage: escape_agent.py LEDGER [--hang] [--short] [--scrub]
Reads one stream-json user line, then double-forks: an intermediate child calls setsid() and forks
the grandchild, then exits, so the grandchild has a session and group of its own and no parent
in the turn. Every event is one O_APPEND JSON line in LEDGER with its wall time ``t``:
{"event": "start", "pid", "uuid", "alive_before": [pids of earlier starts still alive]},
{"event": "grandchild", "pid"}, {"event": "term", "pid"} (SIGTERM received, then exit 143).
The grandchild sleeps (``--short``: exits at once, leaving a zombie for its reaper; ``--scrub``:
it execs ``sleep`` with an empty environment, so no marker variable is left on it). Without
``--hang`` the agent exits 0 once the grandchild is running; with it, it hangs until signalled.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path


def record(ledger: str, **event: object) -> None:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps({**event, "t": time.time()}) + "\n").encode())
    finally:
        os.close(fd)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def earlier_alive(ledger: str) -> list[int]:
    try:
        lines = Path(ledger).read_text().splitlines()
    except OSError:
        return []
    starts = [json.loads(x)["pid"] for x in lines if '"start"' in x]
    return [pid for pid in starts if pid != os.getpid() and alive(pid)]


def on_term(ledger: str) -> None:
    def handler(signum: int, frame: object) -> None:
        record(ledger, event="term", pid=os.getpid())
        os._exit(143)

    signal.signal(signal.SIGTERM, handler)


def escape(ledger: str, short: bool, scrub: bool = False) -> None:
    ready_r, ready_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            on_term(ledger)
            record(ledger, event="grandchild", pid=os.getpid())
            os.write(ready_w, b"x")
            if short:
                os._exit(0)
            if scrub:
                os.execve("/bin/sleep", ["sleep", "3600"], {})
            while True:
                time.sleep(3600)
        os._exit(0)
    os.waitpid(middle, 0)  # the grandchild is an orphan from here on
    os.read(ready_r, 1)


def main() -> int:
    ledger, flags = sys.argv[1], sys.argv[2:]
    event = json.loads(sys.stdin.readline())
    on_term(ledger)
    record(ledger, event="start", pid=os.getpid(), uuid=event.get("uuid"),
           alive_before=earlier_alive(ledger))
    escape(ledger, "--short" in flags, "--scrub" in flags)
    if "--short" in flags:
        time.sleep(1.5)  # the turn outlives its escapee: the daemon must still reap the zombie
    while "--hang" in flags:
        time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
