"""A real pseudo-terminal for the CLI: what a person's terminal would receive, byte for byte."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
import tty


def on_pty(env: dict[str, str], *args: str, timeout: float = 60) -> bytes:
    """``agentmaild ARGS`` with stdout on a raw pty slave (no ONLCR: a CR can only come from the
    program); everything the master read until the program exited, which must be with 0."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "agentmaild", *args], env=env,
                                stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=subprocess.PIPE)  # fmt: skip
    finally:
        os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
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
