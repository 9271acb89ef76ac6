"""Run an everyday command's body as its typer command would, from what ``hot.argv`` read.

The body is the one the typer declaration calls (``cli.reading``, ``cli.sends``, …), under the
same error mapping (``cli.plain.call``: one ``error:`` line or ``--json`` object, exit 1, 2 for a
usage error). What typer's ``main`` adds around a command is kept: Ctrl-C exits 130, an end of
input is ``error: aborted`` (130), and a closed pipe (``agentmaild list | head -1``) exits 1
without a word.
"""

from __future__ import annotations

import errno
import gc
import importlib
import os
import sys
from typing import Any


def run_body(body: str, root: dict[str, Any], values: dict[str, Any]) -> int:
    """Set the root options' state, then run ``body`` ("module:function") with ``values``."""
    from agentmaild.cli import plain

    module, _, name = body.partition(":")
    fn = getattr(importlib.import_module(module), name)
    plain.set_root_options(**root)
    gc.freeze()  # what the imports made lives as long as the process: no collection walks it
    gc.enable()
    try:
        return plain.call(fn, values)
    except KeyboardInterrupt:
        return 130
    except EOFError:
        sys.stderr.write("\nerror: aborted\n")
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        _quiet()
        return 1


def _quiet() -> None:
    """After a closed pipe: nothing more is written, and the exit's flush does not complain."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            pass
    os.close(devnull)
