"""The HTTP face (issue 12): ``check --inject`` over HTTP as a cold process, and the API's
probe / fetch / ack / send latency beside the same operation on the local store.

A real daemon serves the API on a loopback port (``serve --http 127.0.0.1:0``; the port is read
from its JSON log) with an operator token. Cold process: ``agentmaild check --inject --agent x``
with ``AGENTMAIL_URL``/``AGENTMAIL_TOKEN`` set (it loads ``http.client``, never sqlite3), against
``python -c "import http.client, json"`` (target ≤ 1.5x), interleaved in shuffled rounds like
``bench_hook``; 5 messages are re-seeded before each mail run and every run must print all 5.
Latency: N calls of each operation through one keep-alive ``http.client`` connection (what a
long-lived remote agent holds) and the same operation through ``SqliteMailStore``/``Mailer`` in
this process, same store, same run: p50 and p99 in ms. Informative: no target but the cold one.
"""

from __future__ import annotations

import http.client
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import Figure, agentmaild_script, clean_env, fmt

AGENT = "x"
UNREAD = 5
BANNER = f"[agentmail] {UNREAD} new messages for {AGENT}"


def _interpreter(script: Path) -> str:
    first = script.read_text(encoding="utf-8").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def _prepare(db: Path) -> str:
    from agentmaild.models import Agent
    from agentmaild.store.sqlite import SqliteMailStore
    from agentmaild.trust.tokens import SCOPES, mint

    store = SqliteMailStore(db)
    store.add_agent(Agent(name=AGENT, capability="builder"))
    store.add_agent(Agent(name="y", capability="lead"))
    secret, record = mint("operator", SCOPES, now=time.time(), expires_in_s=None)
    store.add_token(record)
    store.close()
    return secret


def _seed(db: Path, n: int = UNREAD) -> list[str]:
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.sqlite import SqliteMailStore

    store = SqliteMailStore(db)
    try:
        # the same seed every round: the store's loop guard must not collapse it
        store.set_team_rules({"duplicate_window_s": 0}, now=0)
        mailer = Mailer(store)
        return [mailer.send(sender="y", to=AGENT, subject=f"step {i} done",
                            body=f"Step {i} finished; please review the diff. " * 3).ids[0]
                for i in range(n)]  # fmt: skip
    finally:
        store.close()


def _start(db: Path, env: dict[str, str], tmp: str) -> tuple[subprocess.Popen[bytes], str]:
    log = Path(tmp) / "daemon.log"
    proc = subprocess.Popen(
        [str(agentmaild_script()), "serve", "--db", str(db), "--http", "127.0.0.1:0"],
        env={**env, "AGENTMAILD_LOG_FORMAT": "json"},
        stdout=log.open("ab"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if '"http.listening"' in line:
                return proc, "http://" + json.loads(line)["address"]
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the daemon's HTTP API did not come up")


def _cold(db: Path, n: int, env: dict[str, str], cwd: str) -> dict[str, list[float]]:
    script = agentmaild_script()
    check = [str(script), "check", "--inject", "--agent", AGENT]
    base = [_interpreter(script), "-c", "import http.client, json"]
    kinds = ["check", "check_empty", "base"]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    rng = random.Random(12)
    for i in range(n + 1):  # round 0 writes the .pyc files
        rng.shuffle(kinds)
        for kind in kinds:
            if kind == "check":
                _seed(db)
            start = time.perf_counter()
            proc = subprocess.run(check if kind != "base" else base, capture_output=True,
                                  env=env, cwd=cwd, check=False)  # fmt: skip
            took = time.perf_counter() - start
            out = proc.stdout.decode("utf-8", "replace")
            ok = proc.returncode == 0 and (
                kind == "base" or (out.startswith(BANNER) if kind == "check" else out == "")
            )
            if not ok:
                raise RuntimeError(f"{kind} misbehaved: {out[:200]!r} {proc.stderr[:300]!r}")
            if i > 0:
                times[kind].append(1000 * took)
    return times


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def _latencies(db: Path, url: str, token: str, n: int) -> dict[str, list[float]]:
    from agentmaild.mail.mailer import Mailer
    from agentmaild.store.sqlite import SqliteMailStore

    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    head = {"authorization": f"Bearer {token}", "content-type": "application/json"}

    def api(method: str, path: str, body: object = None) -> dict[str, object]:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=head)
        r = conn.getresponse()
        data: dict[str, object] = json.loads(r.read())
        if r.status >= 400:
            raise RuntimeError(f"{method} {path}: {r.status} {data}")
        return data

    store = SqliteMailStore(db)
    mailer = Mailer(store)
    ids = _seed(db, 20)
    out: dict[str, list[float]] = {}
    ops = {
        "probe": (lambda i: api("GET", f"/v1/inbox?agent={AGENT}&unread=1"),
                  lambda i: store.inbox(AGENT, unread_only=True)),
        "fetch": (lambda i: api("GET", f"/v1/messages/{ids[i % 20]}"),
                  lambda i: store.get_message(ids[i % 20])),
        "ack": (lambda i: api("POST", "/v1/ack", {"ids": [ids[i % 20]]}),
                lambda i: store.ack([ids[i % 20]])),
        "send": (lambda i: api("POST", "/v1/messages", {"to": AGENT, "subject": f"s{i}",
                                                         "body": "b" * 200, "from": "y"}),
                 lambda i: mailer.send(sender="y", to=AGENT, subject=f"s{i}", body="b" * 200)),
    }  # fmt: skip
    try:
        for name, (remote, local) in ops.items():
            for kind, fn in (("http", remote), ("local", local)):
                fn(0)  # warm
                samples = []
                for i in range(n):
                    start = time.perf_counter()
                    fn(i)
                    samples.append(1000 * (time.perf_counter() - start))
                out[f"{name}_{kind}"] = samples
    finally:
        conn.close()
        store.close()
    return out


def run(quick: bool) -> list[Figure]:
    n_cold, n_lat = (8, 50) if quick else (30, 300)
    with tempfile.TemporaryDirectory(prefix="agentmaild-http-") as d:
        env = clean_env(d)
        db = Path(d) / "mail.db"
        token = _prepare(db)
        proc, url = _start(db, env, d)
        try:
            cold = _cold(db, n_cold, {**env, "AGENTMAIL_URL": url, "AGENTMAIL_TOKEN": token}, d)
            lat = _latencies(db, url, token, n_lat)
        finally:
            proc.terminate()
            proc.wait(30)
    med = {k: statistics.median(v) for k, v in cold.items()}
    paired = statistics.median(c / b for c, b in zip(cold["check"], cold["base"], strict=True))
    paired_empty = statistics.median(
        c / b for c, b in zip(cold["check_empty"], cold["base"], strict=True))
    label = "python -c 'import http.client, json'"
    figures = [
        Figure(name="check --inject over HTTP, 5 unread, cold process (ms)", ours=med["check"],
               unit="ms", baseline=med["base"], ratio=paired, baseline_label=label,
               target=("<=", 1.5),
               notes=[f"N={n_cold} shuffled rounds after a warm-up; medians: check "
                      f"{med['check']:.1f} ms, empty inbox {med['check_empty']:.1f} ms, "
                      f"baseline {med['base']:.1f} ms; ratio = median of per-round ratios; "
                      f"every mail run printed all {UNREAD} messages"]),
        Figure(name="check --inject over HTTP, empty inbox (ms)", ours=med["check_empty"],
               unit="ms", baseline=med["base"], ratio=paired_empty, baseline_label=label),
    ]  # fmt: skip
    for op in ("probe", "fetch", "ack", "send"):
        for p, tag in ((0.5, "p50"), (0.99, "p99")):
            ours, base = _pct(lat[f"{op}_http"], p), _pct(lat[f"{op}_local"], p)
            figures.append(Figure(name=f"HTTP {op} {tag} (ms)", ours=ours, unit="ms",
                                  baseline=base, baseline_label="local store, same run"))
    figures[2].notes.append(f"N={n_lat} calls per operation over one keep-alive connection, "
                            "operator token; local = SqliteMailStore/Mailer in the bench process "
                            "on the same store while the daemon runs")
    return figures


if __name__ == "__main__":
    for f in run(quick="--quick" in sys.argv):
        print(f.name, fmt(f.ours), fmt(f.baseline), f.verdict(), *f.notes, sep="\n  ")
