"""The HTTP face of the daemon: the mail API (``/v1/…``) for agents that cannot open the store.

Owns: ``app`` (the Starlette app), ``context`` (``ApiContext``, what its routes share),
``mail_routes``, ``hook_routes``, ``relay_routes`` and ``meta_routes`` (one list of routes per
concern: a later dashboard mounts beside them),
``errors`` (the error tree mapped to JSON and status codes), ``body`` (request bodies read under
size and time limits),
``auth`` (bearer tokens → the agent a request acts as), ``local`` (tokens off: only the owner's
sockets on a loopback ``Host``), ``openapi`` (the served document),
``server`` (uvicorn inside the daemon's task group) and ``client`` (the stdlib client the CLI and
the hooks use with ``AGENTMAIL_URL``).
May import: ``mail``, ``store``, ``config``, ``tokens``, ``errors``, ``models``, ``hooks``;
``client`` imports only the standard library (it runs on the hook's hot path). Only
``daemon.serve`` imports ``server``.

Why uvicorn rather than hypercorn: uvicorn serves a socket we bind ourselves
(``Server.serve(sockets=[…])``), so a bad address fails the daemon's start with one clear error
and ``task_group.start()`` reports ready only once the port is bound; it stops from a sync flag
(``should_exit``), matching the daemon's "stop is sync" habit; it runs on the daemon's uvloop
event loop with no extra dependency beyond h11; and its protocol class is a documented setting, so
the header deadline against slow clients is a small subclass. Its own signal capture is switched
off: signals stay in the daemon's one ``_signals`` task. Hypercorn would have needed its serve
loop to bind (no readiness before the port is ours) and brings h2/wsproto we do not use.
"""
