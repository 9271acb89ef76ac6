"""Is a store in Overstory mode, and the names and identity that mode uses (stdlib only, hot path).

A store is in Overstory mode when its file is ``.overstory/mail.db`` (Overstory's own location),
or when ``[store] flavor = "overstory"`` says so (``AGENTMAILD_STORE_FLAVOR`` for the hook path,
which never loads the config file). Overstory's files (``sessions.db``, ``pending-nudges/``) are
the store file's siblings.
"""

from __future__ import annotations

import os
import re

OVERSTORY_DIR = ".overstory"
FLAVORS = ("auto", "agentmail", "overstory")
FLAVOR_ENV = "AGENTMAILD_STORE_FLAVOR"
# Overstory's default identity: `ov mail send` writes from it, `ov mail check` reads for it.
ORCHESTRATOR = "orchestrator"

# Overstory takes any name; we accept the ones that are safe as a file name and on one line:
# letters of either case, digits, inner spaces and . _ -, starting with a letter or digit.
LOOSE_NAME = r"^[A-Za-z0-9](?:[A-Za-z0-9 ._-]{0,62}[A-Za-z0-9._-])?$"


def is_overstory_path(db: str) -> bool:
    """True for a store file directly inside a ``.overstory`` directory."""
    return os.path.basename(os.path.dirname(os.path.abspath(db))) == OVERSTORY_DIR


def overstory_mode(db: str, flavor: str | None = None) -> bool:
    """The mode of the store at ``db``: ``flavor`` (config), else the environment, else the path."""
    chosen = flavor if flavor not in (None, "auto") else os.environ.get(FLAVOR_ENV, "auto")
    if chosen == "overstory":
        return True
    if chosen == "agentmail":
        return False
    return is_overstory_path(db)


def default_identity(overstory: bool) -> str:
    """Who you are when no ``--from``/``--agent`` and no ``$AGENTMAIL_AGENT`` says otherwise."""
    from agentmaild.mail.vocab import OPERATOR

    return ORCHESTRATOR if overstory else OPERATOR


def check_loose_name(name: str, what: str = "agent name") -> str:
    """Overstory-mode names: ours plus capitals and inner spaces (``Lead``, ``Builder 1``)."""
    from agentmaild.errors import ValidationError

    if not isinstance(name, str) or not re.fullmatch(LOOSE_NAME, name):
        raise ValidationError(
            f"invalid {what} {str(name)[:80]!r}: use 1-64 of letters, digits, spaces and . _ -, "
            "starting with a letter or digit, not ending with a space"
        )
    return name
