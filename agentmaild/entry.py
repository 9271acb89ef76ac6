"""Console-script entry point: routes the hot paths around typer, everything else to the CLI."""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and len(argv) > 1 and not argv[1].startswith("-"):
        if "-h" not in argv and "--help" not in argv:
            from agentmaild import hooks

            sys.exit(hooks.run_hook(argv[1], argv[2:]))
    if argv[:1] == ["check"] and "--inject" in argv:
        from agentmaild import fast

        if fast.parse_check(argv[1:]) is not None:
            sys.exit(fast.run_check(argv[1:]))
    from agentmaild.cli import run

    run()
