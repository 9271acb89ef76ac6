"""Overstory mode: one team, one registry view, one set of banners with Overstory's ``ov`` CLI.

Owns what agentmaild shares with an Overstory project beyond the ``messages`` table: detecting the
mode (``flavor``), Overstory's agent names and default identity (``flavor``), its pending-nudge
files (``nudges``, stdlib only: the hook path reads them), its ``sessions.db`` registry
(``sessions`` for the raw rows, ``registry`` for the merged view of both registries), and the
link a store in Overstory mode carries (``link``).
"""
