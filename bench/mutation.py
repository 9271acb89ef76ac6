"""Mutation testing of the delivery core: runs mutmut, writes ``bench/mutation.md``.

    python bench/mutation.py            # a fresh run over SCOPE, then the report (`make mutate`)
    python bench/mutation.py --report   # the report only, from the results in ./mutants
    python bench/mutation.py --survivors  # re-run only the last run's survivors (tests added)

Run from the repository root with mutmut installed (``pip install -e '.[mutate]'``). The files
are set in ``[tool.mutmut]`` of pyproject.toml (``only_mutate``, and the fast in-process tests that
judge each mutant); ``SCOPE`` below narrows supervisor.py to its reaping. A mutant is *killed*
when a test fails (or times out) with it in place; a *survivor* is a change no test noticed.
Each survivor's reason (equivalent, or why it was left) comes from ``mutation_reasons.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT = BENCH_DIR / "mutation.md"
TOOK = ROOT / "mutants" / "run-time.txt"
RERUN = ROOT / "mutants" / "rerun.txt"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from mutation_reasons import reason_for  # noqa: E402

# (source file, mutmut name patterns within it). Only these mutants are run and scored.
SCOPE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("agentmaild/delivery/loop.py", ("agentmaild.delivery.loop.*",)),
    ("agentmaild/delivery/figures.py", ("agentmaild.delivery.figures.*",)),
    ("agentmaild/delivery/bookkeeping.py", ("agentmaild.delivery.bookkeeping.*",)),
    (
        "agentmaild/delivery/supervisor.py",
        (
            "agentmaild.delivery.supervisor.x*Supervisor*_tick_forever__mutmut_*",
            "agentmaild.delivery.supervisor.x*Supervisor*_tick__mutmut_*",
        ),
    ),
    ("agentmaild/daemon/recovery.py", ("agentmaild.daemon.recovery.*",)),
    ("agentmaild/store/claim.py", ("agentmaild.store.claim.*",)),
    ("agentmaild/store/memory/deliveries.py", ("agentmaild.store.memory.deliveries.*",)),
)

KILLED = {1: "killed", 3: "killed", 36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout",
          255: "timeout", 0: "survived", 5: "no tests", 33: "no tests"}


@dataclass
class ModuleScore:
    path: str
    statuses: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    @property
    def caught(self) -> int:
        return self.statuses["killed"] + self.statuses["timeout"]


def _in_scope(name: str, patterns: tuple[str, ...]) -> bool:
    from fnmatch import fnmatchcase

    return any(fnmatchcase(name, p) for p in patterns)


def run_mutmut() -> str:
    """A fresh run (no results cached from an older tree); returns how long it took, as words.

    The wall time alone misleads on a shared machine: the CPU time of mutmut and its workers and
    the load average at the end go with it.
    """
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    patterns = [p for _, pats in SCOPE for p in pats]
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "mutmut", "run", *patterns], cwd=ROOT, check=False)
    seconds = time.monotonic() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = (
        f"{seconds:.0f} s wall, {usage.ru_utime + usage.ru_stime:.0f} s CPU, "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    TOOK.write_text(took + "\n", "utf-8")
    RERUN.unlink(missing_ok=True)
    return took


def rerun_survivors() -> None:
    """Runs the last run's survivors again (after tests were added); keeps every other verdict.

    Added tests (with the source unchanged) can only kill more mutants, so a killed verdict stays
    true. mutmut resets every verdict when the test selection in pyproject.toml changes, so the
    verdicts are copied first and those of the mutants not re-run are put back.
    """
    names = {n for s in collect() for n in s.survivors}
    metas = {p: json.loads(p.read_text("utf-8")) for p in (ROOT / "mutants").rglob("*.meta")}
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "mutmut", "run", *sorted(names)], cwd=ROOT, check=False)
    seconds = time.monotonic() - started
    for path, old in metas.items():
        new = json.loads(path.read_text("utf-8"))
        for key, code in old["exit_code_by_key"].items():
            if key not in names:
                new["exit_code_by_key"][key] = code
        path.write_text(json.dumps(new, indent=4), "utf-8")
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    RERUN.write_text(
        f"{now}: only the {len(names)} survivors of the fresh run were run again "
        f"({seconds:.0f} s wall), after tests were added; every other verdict is the fresh run's\n",
        "utf-8",
    )


def collect() -> list[ModuleScore]:
    scores = []
    for path, patterns in SCOPE:
        meta = json.loads((ROOT / "mutants" / f"{path}.meta").read_text("utf-8"))
        score = ModuleScore(path)
        for name, code in sorted(meta["exit_code_by_key"].items(), key=lambda kv: _order(kv[0])):
            if not _in_scope(name, patterns):
                continue
            status = KILLED.get(code, "not checked" if code is None else "suspicious")
            score.statuses[status] += 1
            if status not in ("killed", "timeout"):
                score.survivors.append(name)
        scores.append(score)
    return scores


def _order(name: str) -> tuple[str, int]:
    head, _, number = name.rpartition("__mutmut_")
    return head, int(number) if number.isdigit() else 0


def one_line_diff(name: str, path: str) -> str:
    """The mutant as ``old → new`` on one line (the changed lines, stripped)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(name, path=path).splitlines()
    old = [x[1:].strip() for x in diff if x.startswith("-") and not x.startswith("---")]
    new = [x[1:].strip() for x in diff if x.startswith("+") and not x.startswith("+++")]
    return f"`{' ⏎ '.join(old) or '∅'}` → `{' ⏎ '.join(new) or '∅'}`"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "—"


def render(scores: list[ModuleScore], took: str | None) -> str:
    total = sum(s.total for s in scores)
    caught = sum(s.caught for s in scores)
    lines = [HEADER.strip(), "", *_meta_lines(took), "", "## Score", ""]
    lines += ["| module | killed | timeout | survived | no tests | killed / total | score |"]
    lines += ["|---|---|---|---|---|---|---|"]
    for s in scores:
        st = s.statuses
        lines.append(
            f"| `{s.path}` | {st['killed']} | {st['timeout']} | {st['survived']} | "
            f"{st['no tests']} | {s.caught} / {s.total} | {_pct(s.caught, s.total)} |"
        )
    lines.append(f"| **all** | | | | | **{caught} / {total}** | **{_pct(caught, total)}** |")
    lines += ["", "## Survivors", ""]
    lines += _survivor_lines(scores)
    return "\n".join(lines) + "\n"


def _meta_lines(took: str | None) -> list[str]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"- date: {now}", f"- commit: {commit or 'unknown'} (plus the working tree)",
             f"- time of the last fresh mutmut run (`make mutate`, 2 cores): {took or '(unknown)'}"]
    if RERUN.exists():  # `--survivors` since that fresh run
        note = RERUN.read_text("utf-8").strip()
        lines.append(f"- re-run since (`python bench/mutation.py --survivors`): {note}")
    return lines


def _survivor_lines(scores: list[ModuleScore]) -> list[str]:
    lines: list[str] = []
    for s in scores:
        if not s.survivors:
            continue
        lines += [f"### `{s.path}`", ""]
        for name in s.survivors:
            short = name.rsplit(".", 1)[-1].replace("xǁ", "").replace("ǁ", ".")
            diff = one_line_diff(name, s.path)
            lines.append(f"- `{short}` {diff}: {reason_for(short, diff)}")
        lines.append("")
    return lines or ["None.", ""]


HEADER = """
# Mutation score of the delivery core

Written by `make mutate` (`python bench/mutation.py`; not part of `make test`). The tool is
[mutmut](https://pypi.org/project/mutmut/) 3.8.1: it changes one operator, constant, condition or
argument at a time in the files below and reruns the fast in-process tests that reach the changed
function (the store contract tests over real SQLite and the memory fake, the delivery loop's unit
tests with `FakeChannel`, and the focused `tests/unit/test_mutation_kills_*.py`). A mutant is
*killed* when some test fails or times out with it in place. Real-daemon integration tests are left
out: they run the package in a subprocess, where a mutant is never switched on.

Why mutmut rather than cosmic-ray: mutmut 3 needs only a `[tool.mutmut]` table in pyproject.toml
and a `mutants/` scratch copy, runs each mutant in a forked worker against only the tests that
cover the mutated function (so a run takes minutes on two cores), and can name and diff each
survivor (`mutmut show`). cosmic-ray needs a session database, a separate init/exec/report cycle
and runs the whole chosen test command per mutant, which is slower here for no gain.

In supervisor.py only the reaping is scored (`Supervisor._tick_forever`, which makes a sweep due
once a lease, and `Supervisor._tick`, which reaps expired claims when one is due); the rest of the
supervisor is covered by the real-daemon tests instead.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="report the last run only")
    parser.add_argument(
        "--survivors", action="store_true", help="re-run only the last run's survivors"
    )
    args = parser.parse_args()
    if args.survivors:
        rerun_survivors()
    took = None if args.report or args.survivors else run_mutmut()
    if took is None and TOOK.exists():
        took = TOOK.read_text("utf-8").strip()
    scores = collect()
    OUT.write_text(render(scores, took), "utf-8")
    total = sum(s.total for s in scores)
    print(f"mutation score: {sum(s.caught for s in scores)} / {total} killed; see {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
