"""Who ``to`` names: one agent, a group (``@all``, ``@builders``), a work queue or a peer address.

``Mailer.send`` asks here before it writes; group members are filtered by state, a single
recipient is checked later inside the insert's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentmaild.config import LimitsConfig
from agentmaild.errors import ValidationError
from agentmaild.ids import check_name
from agentmaild.models import KNOWN_CAPABILITIES, Agent
from agentmaild.rules.queues import check_queue, is_queue
from agentmaild.store import checks
from agentmaild.store.base import MailStore
from agentmaild.trust.peers import is_peer_address, split_peer_address


def groups(agents: Sequence[Agent]) -> list[str]:
    caps = sorted({*KNOWN_CAPABILITIES, *(a.capability for a in agents)})
    return ["@all", *(f"@{c}" for c in caps)]


def expand(store: MailStore, limits: LimitsConfig, to: str, sender: str) -> tuple[list[str], bool]:
    """Recipients for ``to`` (a name or a group) and whether it was a group."""
    ov = store.overstory
    if is_queue(to):
        return [check_queue(store, to, limits.refuse_unknown_recipients)], False
    if is_peer_address(to):  # mail `agentmaild relay` forwards to another trust domain
        split_peer_address(to)
        return [to], False
    if not to.startswith("@"):
        check_name(to, "recipient", loose=ov is not None)
        return [to], False
    agents = store.list_agents() if ov is None else ov.merge(store.list_agents())
    group = to[1:]
    if group == "all":
        members = [a for a in agents if not checks.ended(a.state)]
    else:
        caps = {a.capability for a in agents} | set(KNOWN_CAPABILITIES)
        cap = group if group in caps else group[:-1] if group.endswith("s") else None
        if cap not in caps:
            raise ValidationError(
                f"unknown group {to!r}; valid groups: {', '.join(groups(agents))} "
                "(plurals work too, e.g. @builders)"
            )
        members = [a for a in agents if a.capability == cap and not checks.ended(a.state)]
    names = [a.name for a in members if a.name != sender]
    if not names:
        raise ValidationError(
            f"group {to!r} has no active recipient besides {sender}; "
            f"valid groups: {', '.join(groups(agents))}"
        )
    return names, True
