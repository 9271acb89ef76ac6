"""The control socket: wire protocol, the daemon's server and command handler, a sync client.

Owns: ``protocol`` (the versioned NDJSON format), ``server`` (accepting, limits, eviction under a
flood), ``socketfile`` (the socket file's lifecycle and re-binding), ``handler`` (the commands),
``client`` (the light sync client), ``peer`` (uid checks of a socket file and its peer), and
``replies`` (the shape of the replies the CLI prints).

Import the submodules directly. This package imports nothing, so that ``control.client`` (used on
the CLI's ``send`` path) never drags in anyio or structlog through ``control.server``; ``peer``
and ``replies`` are stdlib only for the same reason.
"""
