"""The ``logs`` command: an agent's own log (its child output), the last lines, or followed.

Read-only: it never creates a store. Ctrl-C ends ``-f`` quietly (exit 0). On a terminal the log's
control characters are shown, not obeyed (``render.visible``): an agent's output must not drive the
reader's terminal; a pipe gets the bytes as written.
"""

from __future__ import annotations

import codecs
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from agentmaild.cli.common import DbOpt, command, open_store
from agentmaild.errors import NotFound
from agentmaild.ids import check_name

# Channels whose agent process the daemon runs and whose output it logs.
_LOGGED_CHANNELS = ("spawn", "stdin")


class _Shown:
    """Writes chunks of the log to stdout, made visible on a terminal; a character split between
    two chunks is held until its rest arrives (invalid UTF-8 shows as U+FFFD)."""

    def __init__(self) -> None:
        self.terminal = sys.stdout.isatty()
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def __call__(self, data: bytes) -> None:
        if self.terminal:
            from agentmaild.render.framing import visible

            data = visible(self.decoder.decode(data)).encode("utf-8", "replace")
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()



def _log_of(db: str | None, agent: str) -> tuple[Path, str | None]:
    """The agent's log file and channel (None: not registered, e.g. removed since)."""
    from agentmaild.procs.logfiles import log_path

    with open_store(db, readonly=True) as store:
        registered = store.get_agent(agent)
        path = log_path(store.location.local_path, agent)  # this machine's agents' logs
    if registered is None and not path.exists():
        raise NotFound(f"no agent named {agent!r}")
    return path, registered.channel if registered is not None else None


def _no_log_note(agent: str, channel: str | None, path: Path) -> str:
    if channel is not None and channel not in _LOGGED_CHANNELS:
        return f"{agent} has no log: only spawn and stdin agents have one ({agent} is {channel})"
    return f"no log yet for {agent}: it starts at {path} with the agent's first delivery"


def _follow(path: Path, offset: int, write: _Shown) -> None:
    from agentmaild.procs.logtail import Follower

    try:
        Follower(path, write, offset).run()
    except KeyboardInterrupt:
        pass  # Ctrl-C is how following ends: a normal exit
    except BrokenPipeError:
        # The reader went away (`logs -f | head`): nothing more to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def logs(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="Whose log.")],
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing what is appended, until Ctrl-C."),
    ] = False,
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=0, help="Start with the last N lines.")
    ] = 20,
    db: DbOpt = None,
) -> None:
    """Print the tail of an agent's own log; -f follows it (across rotation) until Ctrl-C.

    The log is <store dir>/logs/<agent>.log: the output of a spawn or stdin agent's processes.
    """
    from agentmaild.procs.logtail import tail

    check_name(agent)
    path, channel = _log_of(db, agent)
    if not path.exists():
        typer.echo(_no_log_note(agent, channel, path), err=True)
        if not follow or (channel is not None and channel not in _LOGGED_CHANNELS):
            return
    text, end = tail(path, lines)
    write = _Shown()
    try:
        write(text)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    if follow:
        _follow(path, end, write)


def register(app: typer.Typer) -> None:
    app.command(name="logs")(command(logs))
