"""Console-script entry point: routes the hot paths around typer, everything else to the CLI."""

from __future__ import annotations

import gc
import os
import sys


def _exit_now(code: int) -> None:
    """End a hot-path process without the interpreter's teardown.

    Closing the last connection to a WAL database checkpoints it, which costs fsyncs on every
    hook call; skipping the close leaves the committed WAL for the daemon (or the next writer)
    to checkpoint, which is no less durable than ``synchronous=NORMAL`` already is.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    if "agentmaild.hot.classcache" in sys.modules:
        sys.modules["agentmaild.hot.classcache"].save()
    os._exit(code)


def _hoist_db(argv: list[str]) -> list[str]:
    """``--db PATH send …`` as ``send … --db PATH``: the global option and the command's own are
    one store, so the fast send serves both spellings (given twice, it defers to typer)."""
    if argv[:1] == ["--db"] and len(argv) > 2:
        return [*argv[2:], "--db", argv[1]]
    if argv[:1] and argv[0].startswith("--db="):
        return [*argv[1:], argv[0]]
    return argv


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and len(argv) > 1 and not argv[1].startswith("-"):
        if "-h" not in argv and "--help" not in argv:
            from agentmaild.hooks import run as hooks

            _exit_now(hooks.run_hook(argv[1], argv[2:]))
    if argv[:1] == ["check"] and "--inject" in argv:
        from agentmaild.hot import check as fast
        if fast.parse_check(argv[1:]) is not None:
            _exit_now(fast.run_check(argv[1:]))
    # A cold command allocates much and frees little while it imports: the cyclic collector's
    # passes then are pure cost (~5% of its CPU). The hot send ends with the process; the CLI
    # turns the collector back on once it knows its command (``cli.lazy.LazyGroup``).
    gc.disable()
    import atexit

    from agentmaild.hot import classcache

    classcache.install()
    atexit.register(classcache.save)
    sending = _hoist_db(argv)
    if sending[:1] == ["send"] or sending[:1] == ["reply"]:
        from agentmaild.hot import send as fast_send
        if fast_send.parse_send(sending[1:], sending[0]) is not None:
            _exit_now(fast_send.run_send(sending[1:], sending[0]))
    from agentmaild.cli.app import run

    run()
