"""The daemon process: ``agentmaild serve`` and installing it as a service.

Owns: ``serve`` (start-up checks → store lock → socket → recovery of a dead predecessor → task
group of control server, signals, checkpoints, store watch, history pruning and the delivery
supervisor → bounded shutdown), ``lock`` (the per-store lock, named from the resolved path),
``recovery`` (re-queueing a crashed daemon's claims and reporting interrupted agents), ``orphans``
(stopping a dead daemon's surviving agent processes), ``journal`` (the agent-process journal over
the store), ``checkpoints`` (the WAL checkpointer), ``retention`` (pruning delivery history),
``service`` (installing and removing the systemd/launchd service files), ``service_render``
(their text).
May import: ``delivery``, ``control``, ``channels.factory`` (lazily), ``store``, ``mail``,
``config``, ``log``. The control handler reaches the daemon only through the narrow
``control.handler.DaemonPort`` protocol, so ``control`` never imports this package.
"""
