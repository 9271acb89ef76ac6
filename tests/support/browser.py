"""Debian's Chromium driven by Playwright (no browser download), and a dashboard daemon for it.

One browser for the browser tests (``browser`` fixture in ``tests/browser/conftest.py``); each test
gets a fresh context, logged in once through the URL ``agentmaild dashboard`` prints.
Screenshots go to ``$SCREENSHOTS_DIR`` when set (``make screenshots`` points it at
``docs/screenshots``), else to the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tests.support.daemon import DaemonProc

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
# Headless, no sandbox (CI runs as root), and nothing that phones home or updates itself.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """The system Chromium; a clear failure (never a skip) when it is missing."""
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        raise AssertionError(
            f"no Chromium at {CHROMIUM}: install Debian's `chromium` package (.ci/run does)"
        )
    return CHROMIUM


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)


def dashboard_url(d: DaemonProc) -> str:
    """The URL (token included) that the real ``agentmaild dashboard --json`` prints."""
    done = d.cli("dashboard", "--no-open", "--json")
    assert done.returncode == 0, done.stderr
    url: str = json.loads(done.stdout)["url"]
    return url


def screenshot_dir(default: Path) -> Path:
    where = Path(os.environ.get("SCREENSHOTS_DIR") or default)
    where.mkdir(parents=True, exist_ok=True)
    return where
