"""The daemon process: ``agentmaild serve`` and installing it as a service.

Owns: ``serve`` (the store's services → their checks and lock → socket → recovery of a dead
predecessor → task group of control server, signals, wake-ups, the backend's own tasks, history
pruning and the delivery supervisor → bounded shutdown), ``recovery`` (re-queueing a crashed
daemon's claims and reporting interrupted agents), ``orphans`` (stopping a dead daemon's surviving
agent processes), ``journal`` (the agent-process journal over the store), ``retention`` (pruning
delivery history), ``service`` (installing and removing the systemd/launchd service files),
``service_render`` (their text). What differs per backend (lock, checkpoints, file watch,
heartbeat, LISTEN, outages) is the store's: ``store.services``; the daemon never names a backend.
May import: ``delivery``, ``control``, ``channels.factory`` (lazily), ``store``, ``mail``,
``config``, ``log``. The control handler reaches the daemon only through the narrow
``control.handler.DaemonPort`` protocol, so ``control`` never imports this package.
"""
