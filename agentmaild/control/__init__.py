"""The control socket: wire protocol, the daemon's async server and a light synchronous client.

Import the submodules directly. This package imports nothing, so that ``control.client`` (used on
the CLI's ``send`` path) never drags in anyio or structlog through ``control.server``.
"""
