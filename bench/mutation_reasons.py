"""Why each mutant left alive by ``make mutate`` was left: equivalent, or not worth a test.

Keyed by mutmut's mutant name (stable while its function is unchanged); read by mutation.py.
"""

from __future__ import annotations

REASONS: dict[str, str] = {}
