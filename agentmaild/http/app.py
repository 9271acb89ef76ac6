"""The Starlette app of the HTTP face: ``build_app(ctx)`` assembles every route under one context.

``build_app(ctx)`` assembles the routes of each concern module (``mail_routes``, ``meta_routes``,
``hook_routes``, ``relay_routes``):
each exports ``routes() -> list[BaseRoute]`` so a later module (the dashboard) is one more list.
With tokens off, ``local.OwnerOnly`` stands in front of all of them. What the routes share,
``ApiContext``, lives in ``context``.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from agentmaild.errors import AgentmaildError
from agentmaild.http import errors
from agentmaild.http.context import ApiContext


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
