"""Work queues spread work (issue 32, item 5), with the real daemon on both stores: a queue message
goes to the idle member served least recently, so one message at a time goes round the members,
and a burst is shared among the idle members, one each, instead of piling on the first to claim."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from tests.support.daemon import agent_cmd
from tests.support.net import daemon_answers
from tests.support.store_targets import StoreTarget
from tests.support.waiting import read_jsonl, wait_for

MEMBERS = ("w1", "w2", "w3")


def test_queue_work_goes_to_the_idle_member_served_least_recently(
    tmp_path: Path, store_target: StoreTarget
) -> None:
    book = tmp_path / "ledger.jsonl"
    store = store_target.open()
    store.add_agent(Agent(name="lead", capability="lead"))
    for name in MEMBERS:
        store.add_agent(Agent(name=name, capability="builder", channel="stdin",
                              command=agent_cmd("queue_agent.py", str(book))))  # fmt: skip
        store.join_queue("builds", name)
    mailer = Mailer(store)
    log = (tmp_path / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "agentmaild", "serve"], env=store_target.env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: daemon.poll() is not None or daemon_answers(store_target.socket), 30,
                 "the daemon's socket")  # fmt: skip
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]

        def taken(n: int) -> list[str]:
            wait_for(lambda: len(read_jsonl(book)) >= n and store.totals()["unread"] == 0, 60,
                     f"{n} queue messages delivered and acked")  # fmt: skip
            return [row["agent"] for row in read_jsonl(book)]

        # One at a time, each sent once the last was acked: every member idle each time, so each
        # message goes to the one served least recently — round the members, twice.
        for i in range(6):
            mailer.send(sender="lead", to="queue:builds", subject=f"build {i}", body="go")
            taken(i + 1)
        rounds = taken(6)
        assert sorted(rounds[:3]) == sorted(MEMBERS), rounds
        assert rounds[3:] == rounds[:3], rounds  # the same turn order again
        # A burst: one message each, in the same turn order (the next in turn is idle before the
        # one that just took a message acks it and would claim again).
        for i in range(3):
            mailer.send(sender="lead", to="queue:builds", subject=f"burst {i}", body="go")
        burst = taken(9)[6:]
        assert sorted(burst) == sorted(MEMBERS), burst
        assert Counter(taken(9)) == dict.fromkeys(MEMBERS, 3)
    finally:
        store.close()
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(30)
        log.close()
    assert code == 0
