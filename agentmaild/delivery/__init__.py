"""Delivery: one loop per agent that claims its unread mail, injects it and acks or releases it.

Owns: ``loop`` (``DeliveryLoop.step()``: busy? → claim → inject → ack/release; ``run()``),
``figures`` (the loop's counters, backoff and busy spell; settling an attempt; its snapshot),
``busy`` (busy spells: since when, why, warned once when too long),
``supervisor`` (one supervised loop per registered agent; registry sync, restarts, wake/retry),
``roster`` (the supervisor's per-agent entries: pause/resume, drain, the status snapshot),
``bookkeeping`` (the shielded ack/release with retries, dead letters and their reports),
``types`` (settings, outcomes, the clock).
May import: ``store.aio``, ``channels.base``, ``mail``, ``models``, ``render``, ``errors``,
``config``. Never imports ``daemon``, ``control`` or ``cli``: the daemon hands it a store and a
channel factory.
"""
