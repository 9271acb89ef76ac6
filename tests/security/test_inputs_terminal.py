"""Mail text cannot drive the reader's terminal: escapes are shown, not obeyed, on a real pty.

A message body (and subject) carries an OSC 52 clipboard write, a window-title change, a clear
screen, a carriage-return overwrite, a C1 CSI and DEL. The real CLI runs as a subprocess with its
stdout on the slave side of a pseudo-terminal (raw mode, so the bytes read from the master are
exactly what the program wrote). No ESC, BEL, CR or C1 byte may arrive; the visible ``\\xNN``
form must. The agent-facing forms are unchanged: the same commands into a pipe (and ``--json``)
carry the bytes as stored.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import tty
from pathlib import Path

import pytest

from agentmaild.mail.mailer import Mailer
from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore

pytestmark = pytest.mark.timeout(120)

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # clipboard := "rm -rf ~"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
BODY = f"hello {OSC52}{TITLE}{CLEAR}safe text\rEVIL\n\tindented \x9b31mred\x7f end"
SUBJECT = "urgent \x1b[2J \x9b1m"
# Bytes a terminal acts on: ESC, BEL, CR, C1 CSI (UTF-8 encoded), DEL.
FORBIDDEN = [b"\x1b", b"\x07", b"\r", b"\xc2\x9b", b"\x7f"]


@pytest.fixture
def setup(tmp_path: Path) -> tuple[dict[str, str], str]:
    db = tmp_path / "mail.db"
    store = SqliteMailStore(db)
    for name in ("ann", "bob", "carl", "dora", "ed"):
        store.add_agent(Agent(name=name, capability="builder"))
    mailer = Mailer(store)
    first = mailer.send(sender="ann", to="bob", subject=SUBJECT, body=BODY).ids[0]
    for name in ("carl", "dora", "ed"):
        mailer.send(sender="ann", to=name, subject=SUBJECT, body=BODY)
    store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTMAIL_", "AGENTMAILD_"))}
    env.update(
        AGENTMAIL_DB=str(db), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        PYTHONIOENCODING="utf-8", TERM="xterm",
    )  # fmt: skip
    return env, first


def on_pty(env: dict[str, str], *args: str) -> bytes:
    """Run the CLI with stdout on a raw pty slave; everything the master read until it exited."""
    master, slave = os.openpty()
    tty.setraw(slave)  # no ONLCR: a CR in the output can only come from the program
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentmaild", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
            env=env,
        )
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the slave side is closed, the child is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else b""
    finally:
        os.close(master)
        if proc.stderr is not None:
            proc.stderr.close()
    return b"".join(chunks)


def on_pipe(env: dict[str, str], *args: str) -> bytes:
    proc = subprocess.run(
        [sys.executable, "-m", "agentmaild", *args], capture_output=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _assert_shown_not_obeyed(out: bytes, *, body: bool) -> None:
    for byte in FORBIDDEN:
        assert byte not in out, f"{byte!r} reached the terminal: {out[:400]!r}"
    text = out.decode("utf-8")
    # The subject, visibly (inbox, list and the agent's batch JSON-quote it, which spells ESC
    # \u001b; the batch spells the C1 CSI \u009b too).
    assert "\\x1b[2J" in text or "\\u001b[2J" in text
    assert "\\x9b1m" in text or "\\u009b1m" in text
    if body:
        assert "\\x1b]52;c;cm0gLXJmIH4K\\x07" in text and "\\x1b]0;pwned\\x07" in text
        assert "safe text\\x0dEVIL\n\tindented \\x9b31mred\\x7f end" in text


@pytest.mark.parametrize(
    ("args", "body"),
    [
        (("read", "{id}"), True),
        (("thread", "{id}"), True),
        (("inbox", "--agent", "bob"), False),
        (("list",), False),
    ],
)
def test_reading_commands_show_escapes_on_a_terminal(
    setup: tuple[dict[str, str], str], args: tuple[str, ...], body: bool
) -> None:
    env, first = setup
    argv = [a.replace("{id}", first) for a in args]
    _assert_shown_not_obeyed(on_pty(env, *argv), body=body)
    piped = on_pipe(env, *argv)
    assert SUBJECT.encode() in piped or json.dumps(SUBJECT, ensure_ascii=False).encode() in piped
    if body:
        assert BODY.encode() in piped  # a pipe (an agent, a script) gets the bytes as stored


@pytest.mark.parametrize("inject", [True, False])
def test_check_shows_escapes_on_a_terminal_and_keeps_them_for_agents(
    setup: tuple[dict[str, str], str], inject: bool
) -> None:
    env, _ = setup
    flag = ["--inject"] if inject else []
    _assert_shown_not_obeyed(on_pty(env, "check", "--agent", "carl", *flag), body=True)
    assert BODY.encode() in on_pipe(env, "check", "--agent", "dora", *flag)
    as_json = json.loads(on_pty(env, "check", "--agent", "ed", *flag, "--json"))
    texts = [as_json["text"]] if inject else [m["body"] for m in as_json["messages"]]
    assert any(BODY in t for t in texts), as_json  # --json carries the text exactly


def test_bidi_and_c1_controls_are_escaped_for_a_person_and_kept_in_the_json(
    setup: tuple[dict[str, str], str], tmp_path: Path
) -> None:
    """U+202E (right-to-left override) reorders what a person reads without a control byte;
    U+009B is a one-byte CSI. ``read`` on a terminal spells both; ``read --json`` escapes both
    (``\\u202e``), and its reader gets the exact text back."""
    env, _ = setup
    body = "run \u202etxt.exe\u202c then \u2066x\u2069 and \x9b2J"
    store = SqliteMailStore(tmp_path / "mail.db")
    mid = Mailer(store).send(sender="ann", to="bob", subject="bidi \u202e", body=body).ids[0]
    store.close()
    shown = on_pty(env, "read", mid).decode("utf-8")
    assert "run \\u202etxt.exe\\u202c then \\u2066x\\u2069 and \\x9b2J" in shown
    raw = on_pipe(env, "--json", "read", mid)
    for char in ("\u202e", "\u202c", "\u2066", "\u2069", "\x9b"):
        assert char.encode() not in raw, (char, raw)
    assert json.loads(raw)["message"]["body"] == body
