"""The wake socket of a real `agentmaild serve`: a datagram delivers without any control request."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from agentmaild.control.client import WAKE_SUFFIX, send_wake
from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc, agent_cmd
from tests.support.waiting import wait_for


def test_a_wake_datagram_delivers_at_once_and_the_file_goes_with_the_daemon(
    store: SqliteMailStore, tmp_path: Path, daemons: Callable[..., DaemonProc]
) -> None:
    rec = tmp_path / "w1.jsonl"
    store.add_agent(Agent(name="w1", capability="builder", channel="spawn",
                          command=agent_cmd("record_agent.py", str(rec))))
    d = daemons({"AGENTMAILD_DAEMON_POLL_INTERVAL_S": "600"})  # only a wake can find the mail
    wake = Path(os.fspath(d.sock) + WAKE_SUFFIX)
    st = wake.lstat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    wait_for(lambda: d.status_row("w1")["loop"] == "idle", 20, "w1's loop idle")
    mid = Mailer(store).send(sender="bob", to="w1", subject="by datagram", body="x").ids[0]
    assert send_wake(d.sock, ["w1"])
    wait_for(lambda: store.get_message(mid).read, 20, "delivery after the datagram")  # type: ignore[union-attr]
    assert d.stop() == 0
    assert not wake.exists()
