"""The control socket: wire protocol, the daemon's server and command handler, a sync client.

Import the submodules directly. This package imports nothing, so that ``control.client`` (used on
the CLI's ``send`` path) never drags in anyio or structlog through ``control.server``.
"""
