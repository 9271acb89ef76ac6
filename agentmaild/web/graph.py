"""The team picture: who mailed whom in the last hour, and the parent tree, as inline SVG.

Drawn on the server (no script, no CDN): the agents on a circle (readable at 20 and more), one
curved arrow per sender → recipient, its width growing with the messages sent, its count at its
middle. Traffic the loop guard held (``am_thread_holds``) is drawn dashed and marked ``looped``,
mail that became a dead letter red and marked ``refused``; a parent → child link is a dotted
line. Every label goes through ``escape``: agent names and counts only, never a body.
"""

from __future__ import annotations

import math
import time
from typing import Any

from markupsafe import Markup, escape

from agentmaild.ids import iso_now
from agentmaild.store.reader import Reader

WINDOW_S = 3600.0  # the picture's span
MESSAGES = 20_000  # newest messages looked at for it (the reads stay bounded)
EDGES = 400
_SIZE = 760
_NODE_R = 16


def read(reader: Reader, now: float | None = None) -> dict[str, Any]:
    """The picture's data (on the reader's thread): agents, parents, edges, held pairs."""
    since = iso_now((time.time() if now is None else now) - WINDOW_S)
    agents = reader.rows("agents")
    edges = reader.rows("graph_edges", since=since, window=MESSAGES, limit=EDGES)
    held = {r["pair"] for r in reader.rows("holds", limit=500)}
    return {"agents": agents, "edges": edges, "held": held}


def _positions(names: list[str]) -> dict[str, tuple[float, float]]:
    c = _SIZE / 2
    r = c - 110 if len(names) > 1 else 0.0
    return {n: (c + r * math.cos(2 * math.pi * i / len(names) - math.pi / 2),
                c + r * math.sin(2 * math.pi * i / len(names) - math.pi / 2))
            for i, n in enumerate(names)}  # fmt: skip


def _edge(a: tuple[float, float], b: tuple[float, float], e: dict[str, Any], looped: bool) -> str:
    n, dead = int(e["n"]), int(e["dead"] or 0)
    (x1, y1), (x2, y2) = a, b
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    # Bend to the right of the direction, so a → b and b → a are two arcs.
    mx, my = (x1 + x2) / 2 - uy * length * 0.12, (y1 + y2) / 2 + ux * length * 0.12
    sx, sy = x1 + ux * _NODE_R, y1 + uy * _NODE_R
    ex, ey = x2 - ux * (_NODE_R + 4), y2 - uy * (_NODE_R + 4)
    width = 1.2 + 1.6 * math.log2(n + 1)
    marks = (["looped"] if looped else []) + (["refused"] if dead else [])
    cls = " ".join(["edge", *marks])
    tip = f"{e['from_agent']} → {e['to_agent']}: {n} message{'' if n == 1 else 's'}"
    tip += "".join(f", {dead} dead" if m == "refused" else ", held by the loop guard"
                   for m in marks)  # fmt: skip
    marker = "arrow-bad" if marks else "arrow"
    return (f'<g class="{cls}" data-from="{escape(e["from_agent"])}" '
            f'data-to="{escape(e["to_agent"])}" data-n="{n}"><title>{escape(tip)}</title>'
            f'<path d="M{sx:.1f},{sy:.1f} Q{mx:.1f},{my:.1f} {ex:.1f},{ey:.1f}" '
            f'stroke-width="{width:.1f}" marker-end="url(#{marker})"/>'
            f'<text x="{(sx + 2 * mx + ex) / 4:.1f}" y="{(sy + 2 * my + ey) / 4:.1f}">{n}'
            f"</text></g>")  # fmt: skip


def _node(name: str, at: tuple[float, float], registered: bool) -> str:
    x, y = at
    c = _SIZE / 2
    out = 1 if x >= c - 1 else -1  # labels outside the circle
    anchor = "start" if out > 0 else "end"
    label = escape(name)
    shape = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{_NODE_R}"/>'
             f'<text x="{x + out * (_NODE_R + 5):.1f}" y="{y + 4:.1f}" '
             f'text-anchor="{anchor}">{label}</text>')  # fmt: skip
    if not registered:
        return f'<g class="node implicit" data-agent="{label}"><title>{label}</title>{shape}</g>'
    href = escape(f"/agents/{name}")
    return (f'<a class="node" href="{href}" data-agent="{label}"><title>{label}</title>'
            f"{shape}</a>")


def svg(data: dict[str, Any]) -> Markup:
    """The picture of ``read``'s data."""
    registered = {a["name"] for a in data["agents"]}
    names = sorted(registered | {e[k] for e in data["edges"] for k in ("from_agent", "to_agent")})
    at = _positions(names)
    parts = ['<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
             'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker>'
             '<marker id="arrow-bad" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
             'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/>'
             "</marker></defs>"]  # fmt: skip
    for a in data["agents"]:
        parent = a.get("parent")
        if parent and parent in at and parent != a["name"]:
            (x1, y1), (x2, y2) = at[parent], at[a["name"]]
            parts.append(f'<line class="parent" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" '
                         f'y2="{y2:.1f}"><title>{escape(parent)} is the parent of '
                         f'{escape(a["name"])}</title></line>')  # fmt: skip
    for e in data["edges"]:
        if e["from_agent"] != e["to_agent"]:
            pair = "|".join(sorted((e["from_agent"], e["to_agent"])))
            parts.append(_edge(at[e["from_agent"]], at[e["to_agent"]], e, pair in data["held"]))
    parts += [_node(n, at[n], n in registered) for n in names]
    total = sum(int(e["n"]) for e in data["edges"])
    label = f"{len(names)} agents, {total} messages in the last hour"
    return Markup(f'<svg class="graph" viewBox="0 0 {_SIZE} {_SIZE}" width="{_SIZE}" '
                  f'height="{_SIZE}" role="img" aria-label="{label}">'
                  f'<title>{label}</title>{"".join(parts)}</svg>')  # fmt: skip
