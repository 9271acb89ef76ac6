"""Bounded waits on observable state, shared by the tests (no sleep-and-hope anywhere)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

BOUND = 30.0  # upper bound for any single wait: only a hang reaches it, never a loaded machine


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until truthy and return its value; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


async def wait_until(predicate: Callable[[], Any], within_s: float = BOUND) -> None:
    """The async form: another process's progress has no event to await, so poll it, bounded."""
    with anyio.fail_after(within_s):
        while not predicate():  # noqa: ASYNC110 - polled: no event to await
            await anyio.sleep(0.01)


def alive(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie nobody reaps counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return not Path("/proc").is_dir()
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a stand-in agent recorded (none yet when the file does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
