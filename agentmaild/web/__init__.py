"""The live web dashboard at ``/`` on the daemon's HTTP face: team, timeline, mail, dead letters.

Owns: ``dashboard`` (what the routes share, and the one SSE producer), ``views`` (routes: pages,
``/events``, the guarded buttons), ``operator`` (Needs you, the agent pages, the graph, mail
written as the operator), ``needs`` (Needs you's ``SOURCES``), ``extras`` (their live parts),
``graph`` (the team picture as SVG), ``logtail`` (an agent's log, bounded),
``hub`` (fan-out with bounded per-browser queues),
``guard`` (sessions and their scopes, same-origin + CSRF; without tokens ``http.local`` has
already admitted only the owner on a loopback ``Host``), ``templating`` (Jinja2, autoescaped; the
SVG sparkline), ``templates/`` and ``static/`` (htmx 2.0.11 vendored, ``live.js``, CSS: no
CDN, no build step).
Its reads go through the reader the store offers (``store.reader.open_reader``: bounded
queries on a read-only connection of its own, search included; the producer's one call per tick).
May import: ``store`` (its reader), ``control.handler`` (the writes go through
the same commands as ``agentmaild retry/pause/resume``), ``mail.mailer`` (mail written here obeys
the CLI's rules), ``procs.logfiles`` and ``render.framing`` (the log ``agentmaild logs`` reads,
shown as on a terminal), ``tokens``, ``errors``, ``ids``.
Only ``http.server`` imports it.
"""

from __future__ import annotations

from agentmaild.web.dashboard import Dashboard

__all__ = ["Dashboard"]
