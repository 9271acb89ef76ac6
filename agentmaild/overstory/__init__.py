"""Overstory mode: one team, one registry view, one set of banners with Overstory's ``ov`` CLI.

Owns what agentmaild shares with an Overstory project beyond the ``messages`` table: detecting the
mode (``flavor``), Overstory's agent names and default identity (``flavor``), its pending-nudge
files (``nudges``, stdlib only: the hook path reads them), its ``sessions.db`` registry
(``sessions``: the raw rows), and the link a store in Overstory mode carries (``link``: the
merged view of both registries, writing and clearing banners). The hook path loads ``flavor``
and ``nudges`` only.
"""
