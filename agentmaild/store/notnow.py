"""``NOT_NOW``: what an inline runner (``store.hops``) answers for a call that would have to wait.

A module of its own, so the SQLite store (on the CLI's paths) can name it without importing the
daemon's async machinery.
"""

from __future__ import annotations

from typing import Any, Final

NOT_NOW: Final[Any] = object()
