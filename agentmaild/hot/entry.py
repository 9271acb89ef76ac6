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


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and len(argv) > 1 and not argv[1].startswith("-"):
        if "-h" not in argv and "--help" not in argv:
            from agentmaild.hooks import run as hooks

            _exit_now(hooks.run_hook(argv[1], argv[2:]))
    # ``check --inject`` runs on every prompt of a hooked agent: it reads the store through the
    # hooks' port, never the whole store.
    if argv[:1] == ["check"] and "--inject" in argv:
        from agentmaild.hot import argv as fast_argv
        from agentmaild.hot import check as fast_check

        opts = fast_check.inject_options(fast_argv.read(argv))
        if opts is not None:
            _exit_now(fast_check.run_check(opts))
    # A cold command allocates much and frees little while it imports: the cyclic collector's
    # passes then are pure cost (~5% of its CPU). The collector is turned back on (what the
    # imports made frozen) once the command is known: here for the everyday commands, in
    # ``cli.lazy.LazyGroup`` for the rest.
    gc.disable()
    import atexit

    from agentmaild.hot import argv as fast_argv
    from agentmaild.hot import classcache

    classcache.install()
    atexit.register(classcache.save)
    got = fast_argv.read(argv)
    if got is not None:
        from agentmaild.hot.everyday import run_body

        sys.exit(run_body(*got))
    from agentmaild.cli.app import run

    run()
