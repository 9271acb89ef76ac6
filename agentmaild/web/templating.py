"""The Jinja2 environment: templates shipped in the package, autoescape on for every template,
and the filters the pages use (ages, durations, the inline SVG sparkline)."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"
_W, _H = 180, 28  # sparkline size in px: one 3-px bar per minute


def make_env() -> Environment:
    # autoescape=True for every template (not only *.html): bodies are untrusted agent output.
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, auto_reload=False)
    from agentmaild.web.graph import svg

    env.filters.update(ago=ago, dur=dur, clock=clock, spark=spark, spark_label=spark_label,
                       team_svg=svg)  # fmt: skip
    return env


def _seconds(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def ago(value: Any, now: float | None = None) -> str:
    """``3.2s``, ``4m``, ``2h`` since an ISO stamp or unix seconds."""
    at = _seconds(value)
    if at is None:
        return "—"
    return dur(max(0.0, (time.time() if now is None else now) - at))


def dur(seconds: Any) -> str:
    if seconds is None:
        return "—"
    s = float(seconds)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def clock(value: Any) -> str:
    at = _seconds(value)
    return "—" if at is None else time.strftime("%H:%M:%S", time.localtime(at))


def spark(buckets: list[tuple[int, float | None, int]]) -> Markup:
    """Bars: deliveries per minute (failures in red); line: mean attempt duration."""
    top = max((n for n, _, _ in buckets), default=0) or 1
    slow = max((m for _, m, _ in buckets if m is not None), default=0.0) or 1.0
    step = _W / max(len(buckets), 1)
    parts = [f'<line x1="0" y1="{_H - 0.5}" x2="{_W}" y2="{_H - 0.5}" class="axis"/>']
    points = []
    for i, (n, mean, failed) in enumerate(buckets):
        x = i * step
        if n:
            h = max(1.0, (_H - 2) * n / top)
            parts.append(f'<rect x="{x:.1f}" y="{_H - h:.1f}" width="{step - 0.6:.1f}" '
                         f'height="{h:.1f}" class="{"bad" if failed else "ok"}"/>')  # fmt: skip
        if mean is not None:
            points.append(f"{x + step / 2:.1f},{_H - 1 - (_H - 4) * mean / slow:.1f}")
    if len(points) > 1:
        parts.append(f'<polyline points="{" ".join(points)}" class="lat"/>')
    total = sum(n for n, _, _ in buckets)
    label = f"{total} attempts in the last hour"
    return Markup(
        f'<svg class="spark" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" role="img" '
        f'aria-label="{label}"><title>{label}</title>{"".join(parts)}</svg>'
    )


def spark_label(buckets: list[tuple[int, float | None, int]]) -> str:
    """``12 in 1 h · 3 failed · mean 140 ms`` under a sparkline."""
    total = sum(n for n, _, _ in buckets)
    if not total:
        return "nothing in 1 h"
    failed = sum(f for _, _, f in buckets)
    weighted = sum(n * m for n, m, _ in buckets if m is not None)
    timed = sum(n for n, m, _ in buckets if m is not None)
    text = f"{total} in 1 h"
    if failed:
        text += f" · {failed} failed"
    return text + (f" · mean {dur(weighted / timed)}" if timed else "")
