"""Runs every benchmark in ``bench/`` and writes the one report, ``bench/results.md``.

    python bench/run.py              # everything; writes bench/results.md  (this is `make bench`)
    python bench/run.py --quick      # a fast smoke run (small sizes); prints only, unless --out
    python bench/run.py --only cold  # one module (bench_cold.py); prints only, unless --out
    python bench/run.py --out F.md   # write the report to F.md instead

Each ``bench/bench_*.py`` exposes ``run(quick: bool) -> list[Figure]``. Every figure sits beside
a baseline measured in the same run; targets are reported as pass/fail, never asserted. The exit
status is 1 when a benchmark module crashed, and with ``--strict`` also when a target failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import sys
import time
import traceback
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from benchlib import Figure, machine_info, with_unit  # noqa: E402

DEFAULT_OUT = BENCH_DIR / "results.md"
COLUMNS = ("figure", "ours", "baseline (same run)", "ratio", "target", "pass/fail")


def discover() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("bench_*.py"))


def _select(names: list[str], only: str | None) -> list[str]:
    if only is None:
        return names
    want = only if only.startswith("bench_") else f"bench_{only}"
    want = want.removesuffix(".py")
    if want not in names:
        raise SystemExit(f"error: no benchmark {only!r}; have: {', '.join(names)}")
    return [want]


def _row(f: Figure) -> tuple[str, ...]:
    base = with_unit(f.baseline, f.unit)
    if f.baseline_label and f.baseline is not None:
        base = f"{base} ({f.baseline_label})"
    ratio = "—" if f.ratio is None else f"{f.ratio:.2f}x"
    return (f.name, with_unit(f.ours, f.unit), base, ratio, f.target_text(), f.verdict())


def _text_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _md_table(rows: list[tuple[str, ...]]) -> str:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(results: dict[str, list[Figure]], errors: dict[str, str], *,
                    quick: bool, info: dict[str, str], started: dt.datetime, elapsed: float) -> str:
    figures = [f for figs in results.values() for f in figs]
    failed = [f.name for f in figures if f.passed is False]
    targets = sum(f.target is not None for f in figures)
    out = [
        "# agentmaild benchmark report",
        "",
        "Written by `make bench` (`python bench/run.py`). Each figure is measured beside its "
        "baseline in the same run; ratio = ours / baseline (for the cold-process figures, the "
        "median of the per-round ratios of interleaved runs). Targets come from issues 2 and 6 "
        "and SPEC §9; they are reported here, not asserted by the tests. Raw numbers are in the "
        "notes below the table.",
        "",
        f"- date: {started.strftime('%Y-%m-%d %H:%M:%S UTC')} ({elapsed:.0f} s)",
        f"- mode: {'QUICK smoke run (small sizes; not representative)' if quick else 'full'}",
        *(f"- {k}: {v}" for k, v in info.items()),
        "",
        _md_table([_row(f) for f in figures]),
        "",
        f"**{targets - len(failed)} of {targets} targets met"
        + (f"; not met: {', '.join(failed)}**" if failed else "**"),
        "",
    ]
    for module, figs in results.items():
        notes = [(f.name, n) for f in figs for n in f.notes]
        if notes:
            out += [f"## {module}", ""]
            out += [f"- *{name}*: {note}" for name, note in notes]
            out.append("")
    if errors:
        out += ["## Benchmarks that crashed", ""]
        out += [f"- `{m}`:\n\n```\n{tb.rstrip()}\n```\n" for m, tb in errors.items()]
    return "\n".join(out).rstrip() + "\n"


def run_modules(names: list[str], quick: bool) -> tuple[dict[str, list[Figure]], dict[str, str]]:
    results: dict[str, list[Figure]] = {}
    errors: dict[str, str] = {}
    for name in names:
        print(f"== {name} {'(quick)' if quick else ''}", flush=True)
        start = time.perf_counter()
        try:
            figures = importlib.import_module(name).run(quick)
        except Exception:
            errors[name] = traceback.format_exc()
            print(errors[name], file=sys.stderr, flush=True)
            continue
        results[name] = figures
        for f in figures:
            print(f"   {f.name}: {with_unit(f.ours, f.unit)} vs {with_unit(f.baseline, f.unit)}"
                  f" -> {f.verdict()}", flush=True)
        print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)
    return results, errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="fast smoke run with small sizes")
    ap.add_argument("--only", metavar="NAME", help="run one module, e.g. store or bench_cold")
    ap.add_argument("--out", type=Path, help=f"report path (default {DEFAULT_OUT} for full runs)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is not met")
    args = ap.parse_args(argv)

    names = _select(discover(), args.only)
    started = dt.datetime.now(dt.UTC)
    info = machine_info()
    t0 = time.perf_counter()
    results, errors = run_modules(names, args.quick)
    elapsed = time.perf_counter() - t0

    figures = [f for figs in results.values() for f in figs]
    print()
    print(_text_table([_row(f) for f in figures]))
    out = args.out
    if out is None and not args.quick and args.only is None:
        out = DEFAULT_OUT
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_markdown(results, errors, quick=args.quick, info=info,
                                       started=started, elapsed=elapsed), encoding="utf-8")
        print(f"\nreport written to {out}")
    else:
        print("\n(partial or quick run: no report written; pass --out PATH to write one)")
    if errors:
        return 1
    return 1 if args.strict and any(f.passed is False for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
