"""Delivery: one loop per agent that claims its unread mail, injects it and acks or releases it.

Owns: ``loop`` (``DeliveryLoop.step()``: busy? → claim → inject → ack/release; ``run()``),
``supervisor`` (one supervised loop per registered agent; restarts, wake/pause/retry, stats),
``bookkeeping`` (the shielded ack/release with retries, dead letters and their reports),
``types`` (settings, outcomes, the clock).
May import: ``store.aio``, ``channels.base``, ``mail``, ``models``, ``render``, ``errors``,
``config``. Never imports ``daemon``, ``control`` or ``cli``: the daemon hands it a store and a
channel factory.
"""
