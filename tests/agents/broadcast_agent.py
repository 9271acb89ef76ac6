#!/usr/bin/env python3
"""Stand-in sender that broadcasts to @all in a loop until killed.

Usage: broadcast_agent.py DB SENDER. After each committed send it prints the broadcast id and its
recipient count on one flushed stdout line, so a test knows what was committed before a kill.
"""

import sys

from agentmaild.mail.mailer import Mailer
from agentmaild.store.sqlite import SqliteMailStore


def main() -> int:
    store = SqliteMailStore(sys.argv[1])
    mailer = Mailer(store)
    n = 0
    while True:
        n += 1
        sent = mailer.send(sender=sys.argv[2], to="@all", subject=f"broadcast {n}",
                           body=f"broadcast body {n} " + "x" * (n % 200))
        print(sent.broadcast_id, len(sent.messages), flush=True)


if __name__ == "__main__":
    sys.exit(main())
