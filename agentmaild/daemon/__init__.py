"""The daemon process: ``agentmaild serve`` and installing it as a service.

Owns: ``serve`` (store lock → recovery of a dead predecessor → task group of control server,
signals, checkpoints and the delivery supervisor → bounded shutdown), ``recovery`` (re-queueing a
crashed daemon's claims and reporting interrupted agents), ``checkpoints`` (the WAL checkpointer),
``service`` (installing and removing the systemd/launchd service files), ``service_render``
(their text).
May import: ``delivery``, ``control``, ``channels.factory`` (lazily), ``store``, ``mail``,
``config``, ``log``. The control handler reaches the daemon only through the narrow
``control.handler.DaemonPort`` protocol, so ``control`` never imports this package.
"""
