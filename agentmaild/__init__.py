"""agentmaild: a SQLite mail store and delivery daemon for teams of AI coding agents.

Kept import-free on purpose: the hook and ``check --inject`` fast paths import this package on
every prompt, so nothing heavy may load here.
"""

__version__ = "0.1.0"
