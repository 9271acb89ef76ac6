"""Dashboard benchmark (issue 13): delivery latency with 3 live browsers open vs none.

The daemon child of ``bench_daemon`` (the real ``Daemon`` with an instant in-process channel, the
ack stamped right after its COMMIT) runs with its HTTP face on, so the dashboard and its SSE
producer are there in both runs. Runs alternate: without browsers, then with three Chromium
contexts (Debian's ``/usr/bin/chromium`` driven by Playwright) on the team page, the timeline and
the team page again, each holding its live stream open and re-rendering on every update. In each
run 1,000 messages go one at a time (send + poke, 5 ms apart), round robin over 5 agents; the
figure is the p99 of send→ack latency over all runs of a kind. Target: with browsers at most 1.10
times the p99 without.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from bench_daemon import SENDER, Harness, _pct
from benchlib import Figure

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BODY = "Build step 3 finished; 14 files changed, tests green. <b>escaped</b>, never rendered."


def _flow(h: Harness, n: int) -> list[float]:
    from agentmaild.control.client import poke
    from agentmaild.mail import Mailer
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(h.db)
    mailer = Mailer(store)
    since = len(h.acks)
    try:
        for i in range(n):
            time.sleep(0.005)
            agent = h.agents[i % len(h.agents)]
            k = h.acked()
            t0 = time.monotonic()
            mailer.send(sender=SENDER, to=agent, subject=f"t0={t0!r}", body=BODY)
            poke(h.sock, [agent])
            if not h.wait_acks(k + 1, 10.0):
                raise RuntimeError(f"message {i} was not acked within 10 s")
    finally:
        store.close()
    return h.latencies(since)


def _http_address(h: Harness) -> str:
    from agentmaild.control.client import request

    address = request(h.sock, "ping", timeout=5.0).get("http")
    if not address:
        raise RuntimeError("the harness daemon did not start its HTTP face")
    return str(address)


class Browsers:
    """Three live dashboard views in one headless Chromium."""

    def __init__(self, url: str) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path="/usr/bin/chromium",
                                                args=CHROMIUM_ARGS)  # fmt: skip
        self.pages: list[Any] = []
        for path in ("/", "/timeline", "/"):
            page = self.browser.new_context().new_page()
            page.goto(url + path)
            page.wait_for_selector("#live-status.on", timeout=20_000)
            self.pages.append(page)

    def updates(self) -> int:
        return sum(int(p.get_attribute("[data-sse]", "data-updates") or 0) for p in self.pages)

    def close(self) -> None:
        self.browser.close()
        self._pw.stop()


def bench_dashboard(tmp: Path, quick: bool) -> list[Figure]:
    n, rounds = (200, 1) if quick else (1000, 2)
    conf = tmp / "xdg" / "agentmaild"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "config.toml").write_text('[http]\nlisten = "127.0.0.1:0"\nrequire_tokens = false\n')
    h = Harness(tmp, "dashboard", [f"agent-{i}" for i in range(5)])
    without: list[float] = []
    with_browsers: list[float] = []
    updates = 0
    try:
        url = f"http://{_http_address(h)}"
        _flow(h, 50)  # warm-up, dropped
        for _ in range(rounds):
            without += _flow(h, n)
            browsers = Browsers(url)
            try:
                before = browsers.updates()
                with_browsers += _flow(h, n)
                updates += browsers.updates() - before
            finally:
                browsers.close()
    finally:
        h.stop()
    ours, base = _pct(with_browsers, 0.99), _pct(without, 0.99)
    notes = [
        f"{len(with_browsers)} deliveries with 3 live views, {len(without)} without, "
        f"alternating in {rounds} round(s) of {n}",
        f"p50 {1000 * _pct(with_browsers, 0.5):.2f} ms with vs {1000 * _pct(without, 0.5):.2f} "
        f"ms without; the views applied {updates} live updates while the messages flowed",
    ]
    return [Figure(name="delivery p99 with 3 dashboards open (1,000 msgs)", ours=ours * 1000,
                   unit="ms", baseline=base * 1000, baseline_label="no browser",
                   target=("<=", 1.10), notes=notes)]  # fmt: skip


def run(quick: bool) -> list[Figure]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="agentmaild-dashboard-") as d:
        return bench_dashboard(Path(d), quick)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for f in run(quick="--quick" in sys.argv):
        print(f.name, f.ours, f.baseline, f.ratio, f.verdict(), *f.notes, sep="\n  ")
