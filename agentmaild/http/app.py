"""The Starlette app of the HTTP face and ``ApiContext``, what every route shares.

``build_app(ctx)`` assembles the routes of each concern module (``mail_routes``, ``meta_routes``,
``hook_routes``):
each exports ``routes() -> list[BaseRoute]`` so a later module (the dashboard) is one more list.
With tokens off, ``local.OwnerOnly`` stands in front of all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.routing import BaseRoute

from agentmaild.config import Config, HttpConfig
from agentmaild.errors import AgentmaildError
from agentmaild.http import errors
from agentmaild.mail import Mailer
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


def build_app(ctx: ApiContext, extra: Iterable[BaseRoute] = ()) -> Starlette:
    from agentmaild.http import hook_routes, mail_routes, meta_routes, relay_routes
    from agentmaild.http.local import OwnerOnly

    # Tokens off: only the owner, on a loopback Host name, reaches any route (``local``).
    owner_only = [] if ctx.http.require_tokens else [Middleware(OwnerOnly)]
    app = Starlette(
        routes=[*meta_routes.routes(), *mail_routes.routes(), *hook_routes.routes(),
                *relay_routes.routes(), *extra],
        exception_handlers={
            AgentmaildError: errors.on_agentmaild_error,
            HTTPException: errors.on_http_exception,
            Exception: errors.on_unexpected,
        },
        middleware=owner_only,
    )
    app.router.redirect_slashes = False  # a 307 with no body is no API answer: 404 instead
    app.state.ctx = ctx
    return app
