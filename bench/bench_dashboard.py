"""Dashboard benchmark (issue 13): delivery latency with 3 live browsers open vs none.

The daemon child of ``bench_daemon`` (the real ``Daemon`` with an instant in-process channel, the
ack stamped right after its COMMIT) runs with its HTTP face on, so the dashboard and its SSE
producer are there in both runs. One headless Chromium (Debian's ``/usr/bin/chromium`` driven by
Playwright) holds three contexts; "with browsers" they show the team page, the timeline and the
team page again, each holding its live stream open and re-rendering on every update; "without"
they show ``about:blank`` (no stream: the producer sleeps). The two kinds alternate in short
rounds (A B B A …) so that the load of a shared machine falls on both alike. Messages go one at
a time (send + poke, 5 ms apart), round robin over 5 agents, 2,000 of each kind; the figure is
the p99 of send→ack latency. Target: with browsers at most 1.10 times the p99 without. The
daemon's CPU time (utime + stime from /proc) is summed over each kind's flows: the CPU the
views cost per delivery (informative); so is Chromium's (every process of the browser's tree),
per live update applied: what the live views cost the machine the daemon shares.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

from benchlib import Figure
from daemon_parts import SENDER, Harness
from daemon_parts import cpu_s as _cpu_s
from daemon_parts import pct as _pct

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BODY = "Build step 3 finished; 14 files changed, tests green. <b>escaped</b>, never rendered."


def _flow(h: Harness, n: int) -> list[float]:
    from agentmaild.control.client import poke
    from agentmaild.mail.mailer import Mailer
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
    """Three dashboard views in one headless Chromium, live (``attach``) or blank (``detach``)."""

    def __init__(self, url: str) -> None:
        from playwright.sync_api import sync_playwright

        self.url = url
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path="/usr/bin/chromium",
                                                args=CHROMIUM_ARGS)  # fmt: skip
        self.pages = [self.browser.new_context().new_page() for _ in range(3)]
        self.applied = 0

    def cpu_s(self) -> float:
        """utime + stime of every Chromium process started under this one, summed."""
        return sum(_cpu_s(pid) for pid in _descendants(os.getpid()) if _is_chromium(pid))

    def attach(self) -> None:
        for page, path in zip(self.pages, ("/", "/timeline", "/"), strict=True):
            page.goto(self.url + path)
            page.wait_for_selector("#live-status.on", timeout=20_000)

    def detach(self) -> None:
        self.applied += sum(int(p.get_attribute("main [data-sse]", "data-updates") or 0)
                            for p in self.pages)  # fmt: skip
        for page in self.pages:
            page.goto("about:blank")

    def close(self) -> None:
        self.browser.close()
        self._pw.stop()


class Streams:
    """The same three live streams read by ``curl`` processes: the daemon's side alone (readers
    in this process would take the GIL from the sender being timed)."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.tmp = tmp
        self.applied = 0
        self._procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def attach(self) -> None:
        for i, topic in enumerate(("team", "timeline:", "team")):
            out = self.tmp / f"stream-{i}.txt"
            proc = subprocess.Popen(["curl", "-s", "-N", "-o", str(out),
                                     f"{self.url}/events?topic={topic}"])  # fmt: skip
            self._procs.append((proc, out))
        for _proc, out in self._procs:  # until each has its first event
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and b"event:" not in _read(out):
                time.sleep(0.02)

    def detach(self) -> None:
        for proc, out in self._procs:
            proc.terminate()
            proc.wait(5)
            self.applied += _read(out).count(b"\nevent:") + _read(out).startswith(b"event:")
        self._procs.clear()

    def close(self) -> None:
        self.detach()

    def cpu_s(self) -> float:
        return 0.0  # curl's own CPU is not the question this row answers


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text(encoding="ascii")
                children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _is_chromium(pid: int) -> bool:
    try:
        return "chromium" in os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


class Alternated:
    """Latencies and the daemon's CPU seconds with the views live and without; the views' own
    CPU seconds and wall time over the same flows."""

    def __init__(self) -> None:
        self.live: list[float] = []
        self.idle: list[float] = []
        self.live_cpu = 0.0
        self.idle_cpu = 0.0
        self.views_cpu = {True: 0.0, False: 0.0}
        self.wall = {True: 0.0, False: 0.0}

    def cpu_ms(self, live: bool) -> float:
        """The daemon's CPU per delivery (ms) while the views were live (or not)."""
        cpu, runs = (self.live_cpu, self.live) if live else (self.idle_cpu, self.idle)
        return 1000 * cpu / max(len(runs), 1)


def _alternate(h: Harness, views: Browsers | Streams, n: int, rounds: int) -> Alternated:
    """The views live, and not, in A B B A … rounds of ``n`` messages."""
    out = Alternated()
    for i in range(rounds):
        for live in ((False, True) if i % 2 == 0 else (True, False)):
            if live:
                views.attach()
            cpu, view_cpu, t0 = _cpu_s(h.proc.pid), views.cpu_s(), time.monotonic()
            latencies = _flow(h, n)
            out.wall[live] += time.monotonic() - t0
            out.views_cpu[live] += views.cpu_s() - view_cpu
            if live:
                out.live += latencies
                out.live_cpu += _cpu_s(h.proc.pid) - cpu
                views.detach()
            else:
                out.idle += latencies
                out.idle_cpu += _cpu_s(h.proc.pid) - cpu
    return out


def bench_dashboard(tmp: Path, quick: bool) -> list[Figure]:
    n, rounds = (100, 2) if quick else (250, 24)  # 6,000 a side: a p99 that 10 % can show
    conf = tmp / "xdg" / "agentmaild"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "config.toml").write_text('[http]\nlisten = "127.0.0.1:0"\nrequire_tokens = false\n')
    h = Harness(tmp, "dashboard", [f"agent-{i}" for i in range(5)])
    browsers: Browsers | None = None
    streams: Streams | None = None
    try:
        url = f"http://{_http_address(h)}"
        _flow(h, 50)  # warm-up, dropped
        streams = Streams(url, tmp)
        curl = _alternate(h, streams, n, rounds)
        browsers = Browsers(url)
        chromium = _alternate(h, browsers, n, rounds)
    finally:
        for views in (streams, browsers):
            if views is not None:
                views.close()
        h.stop()
    updates = browsers.applied
    with_browsers, without = chromium.live, chromium.idle
    with_streams, without_streams = curl.live, curl.idle
    ours, base = _pct(with_browsers, 0.99), _pct(without, 0.99)
    notes = [
        f"{len(with_browsers)} deliveries with 3 live views, {len(without)} without, "
        f"alternating (A B B A …) in rounds of {n}",
        f"p50 {1000 * _pct(with_browsers, 0.5):.2f} ms with vs {1000 * _pct(without, 0.5):.2f} "
        f"ms without; the views applied {updates} live updates while the messages flowed",
    ]
    s_ours, s_base = _pct(with_streams, 0.99), _pct(without_streams, 0.99)
    stream_notes = [f"the daemon's side alone: 3 curl processes read the same streams, "
                    f"{streams.applied} events; p50 {1000 * _pct(with_streams, 0.5):.2f} vs "
                    f"{1000 * _pct(without_streams, 0.5):.2f} ms"]  # fmt: skip
    return [
        Figure(name="delivery p99 with 3 dashboards open in Chromium", ours=ours * 1000,
               unit="ms", baseline=base * 1000, baseline_label="no browser",
               target=("<=", 1.10), notes=notes),
        Figure(name="delivery p99 with 3 live streams (no browser)", ours=s_ours * 1000,
               unit="ms", baseline=s_base * 1000, baseline_label="no stream",
               target=("<=", 1.10), notes=stream_notes),
        Figure(name="daemon CPU per delivery with views open vs without (ms)",
               ours=chromium.cpu_ms(True), unit="ms", baseline=chromium.cpu_ms(False),
               baseline_label="no browser",
               notes=[f"the daemon's utime + stime over the same flows as the Chromium row; with "
                      f"3 curl streams {curl.cpu_ms(True):.3f} vs {curl.cpu_ms(False):.3f} ms"]),
        Figure(name="Chromium CPU per live update, 3 views (ms)",
               ours=1000 * chromium.views_cpu[True] / max(updates, 1), unit="ms",
               notes=[f"every Chromium process's utime + stime over the live flows, over the "
                      f"{updates} updates applied: {_share(chromium, True)} of one core while "
                      f"live, {_share(chromium, False)} while blank"]),
    ]  # fmt: skip


def _share(a: Alternated, live: bool) -> str:
    return f"{100 * a.views_cpu[live] / max(a.wall[live], 1e-9):.1f} %"


def run(quick: bool) -> list[Figure]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="agentmaild-dashboard-") as d:
        return bench_dashboard(Path(d), quick)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for f in run(quick="--quick" in sys.argv):
        print(f.name, f.ours, f.baseline, f.ratio, f.verdict(), *f.notes, sep="\n  ")
