"""``ApiContext``, the daemon as every route sees it, and ``context_of(request)`` that finds it.

Its own module so the route modules (and ``auth``) import it without importing ``app``, which
imports them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.requests import Request

from agentmaild.config import Config, HttpConfig
from agentmaild.mail.mailer import Mailer
from agentmaild.store.aio import AsyncMailStore

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiContext:
    """The daemon as the routes see it: its store, its live config and its delivery wake-up."""

    store: AsyncMailStore
    config: Callable[[], Config]  # the daemon's config now (SIGHUP may change the limits)
    http: HttpConfig  # fixed at start: the address, token rule and request limits
    wake: Callable[[Iterable[str] | None], object]  # Supervisor.wake, as the CLI's poke reaches
    db: str = ""  # the store's path or DSN: where this domain's key file is found (relay)
    started: float = field(default_factory=time.monotonic)

    def mailer(self) -> Mailer:
        return Mailer(self.store.sync, self.config().limits)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` in the store's worker thread: one transaction, never two at once."""
        return await self.store.run_sync(fn, *args, **kwargs)


def context_of(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.ctx
    return ctx
