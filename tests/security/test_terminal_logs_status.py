"""An agent's log and the status text cannot drive a person's terminal (issue 33 item 15).

``agentmaild logs AGENT`` prints what the agent's processes wrote, and ``status`` quotes text
others wrote (a store's path, a crash reason, a server's error). On a real pseudo-terminal every
control character (ESC, BEL, CR, DEL, the C1 CSI) arrives in its visible form, exactly as
``render.visible`` (the one sanitiser every reading command uses) spells it; into a pipe the log
goes as written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentmaild.models import Agent
from agentmaild.procs.logfiles import log_path
from agentmaild.render.framing import visible
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.terminal import on_pty

# Bytes a terminal acts on: ESC, BEL, CR, C1 CSI (UTF-8 encoded), DEL.
FORBIDDEN = [b"\x1b", b"\x07", b"\r", b"\xc2\x9b", b"\x7f"]
HOSTILE = "title \x1b]0;pwned\x07 clip \x1b]52;c;cm0gLXJmIH4K\x07 \x1b[2J\rEVIL \x9b31m \x7f"


def _env(db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "AGENTMAILD_"))}
    env.update(AGENTMAIL_DB=str(db), HOME=str(db.parent), PYTHONIOENCODING="utf-8",
               XDG_CONFIG_HOME=str(db.parent / "xdg"), TERM="xterm")  # fmt: skip
    return env


def _shown_not_obeyed(out: bytes) -> str:
    for byte in FORBIDDEN:
        assert byte not in out, f"{byte!r} reached the terminal: {out[:400]!r}"
    return out.decode("utf-8")


def test_logs_shows_an_agents_escapes_on_a_terminal(tmp_path: Path) -> None:
    db = tmp_path / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="worker", capability="builder", channel="spawn"))
    store.close()
    log = log_path(db, "worker")
    log.parent.mkdir(mode=0o700)
    # The agent's own output: escapes, an é, a byte that is no UTF-8, more escapes.
    raw = b"started\n" + HOSTILE.encode() + b"\ncaf\xc3\xa9 \xff done\x1b[0m\n"
    log.write_bytes(raw)
    log.chmod(0o600)
    shown = _shown_not_obeyed(on_pty(_env(db), "logs", "worker"))
    assert shown == visible(raw.decode("utf-8", "replace"))
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07" in shown and "\\x0dEVIL \\x9b31m \\x7f" in shown
    assert "caf\u00e9 \ufffd done\\x1b[0m\n" in shown
    piped = subprocess.run([sys.executable, "-m", "agentmaild", "logs", "worker"],
                           env=_env(db), capture_output=True, timeout=60)  # fmt: skip
    assert (piped.returncode, piped.stdout) == (0, raw)  # a pipe gets the bytes as written


def test_status_text_shows_escapes_on_a_terminal(tmp_path: Path) -> None:
    where = tmp_path / f"store {HOSTILE.replace('/', '_')}"
    where.mkdir()
    db = where / "mail.db"
    SqliteMailStore(db).close()
    shown = _shown_not_obeyed(on_pty(_env(db), "status"))
    assert f"store: {visible(str(db))} (0 messages, 0 unread)" in shown
