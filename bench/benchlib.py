"""Shared pieces of the benchmarks: the ``Figure`` record, timing helpers and machine info.

Every ``bench/bench_*.py`` module exposes ``run(quick: bool) -> list[Figure]``; ``bench/run.py``
collects the figures into one table (``bench/results.md``). A figure carries our number, the
baseline measured in the same run, and optionally a target on either the ratio or our number.
Figures are reported, never asserted: the table says pass or fail.
"""

from __future__ import annotations

import operator
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
VENV_BIN = ROOT / ".venv" / "bin"

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
}
_OP_SIGNS = {">=": "≥", "<=": "≤", "==": "="}


@dataclass(slots=True, kw_only=True)
class Figure:
    """One row of the report.

    ``target`` is ``(op, value)`` with op one of ``>=``, ``<=``, ``==``, checked against the ratio
    (``target_on="ratio"``) or against our own number (``target_on="ours"``). No target: the row
    is informative and shows "—".
    """

    name: str
    ours: float
    unit: str = ""
    baseline: float | None = None
    baseline_label: str = ""
    ratio: float | None = None  # default: ours / baseline
    target: tuple[str, float] | None = None
    target_on: str = "ratio"
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.target is not None and self.target[0] not in _OPS:
            raise ValueError(f"{self.name}: unknown target operator {self.target[0]!r}")
        if self.target_on not in ("ratio", "ours"):
            raise ValueError(f"{self.name}: target_on must be 'ratio' or 'ours'")
        if self.ratio is None and self.baseline:
            self.ratio = self.ours / self.baseline

    @property
    def passed(self) -> bool | None:
        if self.target is None:
            return None
        value = self.ratio if self.target_on == "ratio" else self.ours
        if value is None:
            return False
        op, bound = self.target
        return _OPS[op](value, bound)

    def target_text(self) -> str:
        if self.target is None:
            return "—"
        op, bound = self.target
        what = "ratio " if self.target_on == "ratio" else ""
        suffix = "" if self.target_on == "ratio" else f" {self.unit}".rstrip()
        return f"{what}{_OP_SIGNS[op]} {fmt(bound)}{suffix}"

    def verdict(self) -> str:
        p = self.passed
        return "—" if p is None else ("pass" if p else "FAIL")


def fmt(x: float | None) -> str:
    """Compact human number: integers stay integers, floats get 3 significant-ish digits."""
    if x is None:
        return "—"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    ax = abs(x)
    if ax >= 100:
        return f"{x:,.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def with_unit(x: float | None, unit: str) -> str:
    return fmt(x) if x is None or not unit else f"{fmt(x)} {unit}"


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def timed_run(argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None
              ) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall time (seconds) of one child process, spawn to exit, with its output."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    return time.perf_counter() - start, proc


def agentmaild_script() -> Path:
    """The installed console script (falls back to the one next to this interpreter)."""
    for candidate in (VENV_BIN / "agentmaild", Path(sys.executable).parent / "agentmaild"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("agentmaild console script not found: run `make venv` first")


def page_size_pragma(our_db: Path | str) -> str:
    """``PRAGMA page_size`` as agentmaild's store file has it, for a baseline's fresh file: the
    baselines write the same DDL with the same PRAGMAs into the same file format, so a ratio
    shows our own overhead, not the page size agentmaild gives the stores it creates (1 KiB).
    Run it on an empty file, before ``journal_mode``."""
    import sqlite3

    src = sqlite3.connect(our_db)
    try:
        return f"PRAGMA page_size = {int(src.execute('PRAGMA page_size').fetchone()[0])}"
    finally:
        src.close()


def clean_env(tmp: str) -> dict[str, str]:
    """The environment for child processes: no agentmaild settings leak in from the caller."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENTMAIL_", "AGENTMAILD_", "PYTHON"))}
    env["XDG_CONFIG_HOME"] = os.path.join(tmp, "xdg")  # no user config file is ever read
    env["HOME"] = tmp
    return env


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + (" (+ uncommitted changes)" if dirty.strip() else "")


def fdatasync_ms(directory: str | None = None, runs: int = 20) -> float:
    """Median wall time of writing 4 KiB and ``fdatasync`` in a temp dir: the disk's sync cost."""
    import tempfile

    times = []
    with tempfile.NamedTemporaryFile(dir=directory) as f:
        for _ in range(runs):
            f.write(b"x" * 4096)
            f.flush()
            start = time.perf_counter()
            os.fdatasync(f.fileno())
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def machine_info() -> dict[str, str]:
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return {
        "CPU": f"{os.cpu_count()} x {_cpu_model()}",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "SQLite": sqlite3.sqlite_version,
        "OS": f"{platform.system()} {platform.release()}",
        "load average at start": load,
        "fdatasync of 4 KiB (median of 20)": f"{fdatasync_ms():.2f} ms",
        "commit": _git_rev(),
    }
