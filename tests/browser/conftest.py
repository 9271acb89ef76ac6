"""One Chromium and one dashboard daemon for the browser tests (the machine is small).

The browser lives for the module, not the session: Playwright's sync API runs an event loop of
its own on this thread, and the async tests a worker runs afterwards need the thread back.

The daemon serves the HTTP face on a kernel-picked loopback port with tokens required (the
default); each test's browser context logs in through the URL ``agentmaild dashboard`` prints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmaild.models import Agent
from agentmaild.store.sqlite import SqliteMailStore
from tests.support.browser import dashboard_url, launch, screenshot_dir
from tests.support.daemon import AGENTS, FAST, DaemonProc, daemon_factory
from tests.support.http_api import base_url, http_env


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = launch(pw)
        yield chromium
        chromium.close()


class Board:
    """The daemon, its store, the dashboard's base URL and a logged-in page maker."""

    def __init__(self, d: DaemonProc, store: SqliteMailStore, shots: Path, browser: Any) -> None:
        self.d, self.store, self.shots, self._browser = d, store, shots, browser
        self.url = base_url(d)
        self.login = dashboard_url(d)
        self._contexts: list[Any] = []

    def page(self, path: str = "/") -> Any:
        context = self._browser.new_context(viewport={"width": 1280, "height": 720})
        self._contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(self.login)  # sets the session cookie, lands on /
        if path != "/":
            page.goto(self.url + path)
        return page

    def shot(self, page: Any, name: str) -> None:
        page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)

    def send(self, to: str, subject: str, body: str, *extra: str) -> str:
        done = self.d.cli("send", "--from", "bob", "--to", to, "--subject", subject,
                          "--body", body, *extra)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return str(done.stdout).strip()

    def close(self) -> None:
        for context in self._contexts:
            context.close()


@pytest.fixture(scope="module")
def board(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Board]:
    tmp = tmp_path_factory.mktemp("dashboard")
    db = tmp / "store" / "mail.db"
    store = SqliteMailStore(db)
    store.add_agent(Agent(name="bob", capability="lead"))
    record = [sys.executable, str(AGENTS / "record_agent.py"), str(tmp / "alice.jsonl")]
    store.add_agent(Agent(name="alice", capability="builder", channel="spawn",
                          command=tuple(record)))  # fmt: skip
    flaky = [sys.executable, str(AGENTS / "flaky_agent.py"), str(tmp / "carol.count"), "2"]
    store.add_agent(Agent(name="carol", capability="builder", channel="spawn",
                          command=tuple(flaky)))  # fmt: skip
    logger = [sys.executable, str(AGENTS / "log_agent.py")]
    store.add_agent(Agent(name="dave", capability="builder", channel="spawn", parent="bob",
                          command=tuple(logger)))  # fmt: skip
    # Urgent mail unread for 2 s is escalated (no other test sends urgent mail).
    env = http_env({"AGENTMAILD_DAEMON_MAX_ATTEMPTS": "2",
                    "AGENTMAILD_LIMITS_UNREAD_ESCALATE_AFTER_URGENT_S": "2",
                    "AGENTMAILD_LIMITS_UNREAD_ESCALATE_INTERVAL_S": "0.2"})  # fmt: skip
    with daemon_factory(db, tmp, defaults=FAST, text=True) as make:
        make_daemon: Callable[..., DaemonProc] = make
        b = Board(make_daemon(env), store, screenshot_dir(tmp / "shots"), browser)
        try:
            yield b
        finally:
            b.close()
            store.close()
