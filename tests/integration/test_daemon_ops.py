"""Daemon operations: SIGHUP reloads config, `status --watch` refreshes, the WAL stays bounded."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.daemon import DaemonProc
from tests.support.waiting import wait_for


def test_sighup_reloads_the_config_file(daemons: Callable[..., DaemonProc], tmp_path: Path) -> None:
    config = tmp_path / "agentmaild.toml"
    config.write_text('[log]\nlevel = "info"\n')
    d = daemons({"AGENTMAILD_CONFIG": str(config)})
    d.ctl("ping")
    # At info, a ping leaves no control.request line (those are debug for ping).
    assert not [e for e in d.events("control.request") if e.get("cmd") == "ping"]

    config.write_text('[log]\nlevel = "debug"\n')
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: d.events("daemon.reloaded"), 20, "the reload")
    d.ctl("ping")
    wait_for(
        lambda: [e for e in d.events("control.request") if e.get("cmd") == "ping"],
        20,
        "a debug line for the ping after the reload",
    )
    assert d.ctl("ping")["pong"]


def test_sighup_with_a_broken_config_keeps_serving(
    daemons: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    config = tmp_path / "agentmaild.toml"
    config.write_text("[daemon]\npoll_interval_s = 1.0\n")
    d = daemons({"AGENTMAILD_CONFIG": str(config)})
    config.write_text("[daemon]\npoll_interval_s = 'soon'\n")
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    [failed] = wait_for(lambda: d.events("daemon.reload_failed"), 20, "the reload to fail")
    assert "poll_interval_s" in failed["error"]
    assert d.ctl("ping")["pong"]


def test_status_watch_refreshes_until_interrupted(daemons: Callable[..., DaemonProc]) -> None:
    d = daemons()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentmaild", "status", "--watch", "--db", str(d.db)],
        env=d.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        seen.extend(proc.stdout)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: sum("daemon: running" in line for line in seen) >= 2,
            15,
            "two refreshes of the status screen",
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
    assert proc.returncode in (0, 130)


def test_daemon_checkpoints_keep_the_wal_bounded(
    daemons: Callable[..., DaemonProc],
    db: Path,
) -> None:
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="sink", capability="builder"))
    d = daemons(
        {
            "AGENTMAILD_DAEMON_CHECKPOINT_INTERVAL_S": "0.3",
            "AGENTMAILD_DAEMON_WAL_CHECKPOINT_PAGES": "200",
        }
    )
    wal = db.with_name(db.name + "-wal")
    page = store.connection.execute("PRAGMA page_size").fetchone()[0]
    mailer = Mailer(store)
    for i in range(3000):
        mailer.send(sender="bob", to="sink", subject=f"s{i}", body="x" * 500)
    # The senders do not checkpoint below ~40 MB; the daemon notices the WAL passed its
    # 200-page mark and truncates it.
    wait_for(lambda: wal.stat().st_size <= 200 * page, 15, "the daemon to truncate the WAL")
    assert d.events("daemon.checkpoint_failed") == []
    assert store.totals()["messages"] == 3000
    store.close()
