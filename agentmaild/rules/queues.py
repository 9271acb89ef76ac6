"""Work queues (anycast): ``send --to queue:NAME`` reaches exactly one member per attempt.

Mail to a queue is one row addressed to ``queue:NAME``. The store hands it out in ``claim``: a
member's delivery loop that finds no mail of its own takes one queue message, atomically, so
two members never hold the same one, when it is its turn (the idle member served least recently:
docs/queues.md); busy members do not claim (their loop skips the step), nor
do members that are completed, zombie or asked to shut down. A failed or abandoned attempt
goes back to the queue under the same delivery id, and the next member to claim it takes it
over with the attempt counted. Membership: ``agents add|update --queue NAME``.
"""

from __future__ import annotations

from agentmaild.errors import RecipientRefused, ValidationError
from agentmaild.ids import check_name
from agentmaild.models import QUEUE_PREFIX
from agentmaild.store.base import MailStore


def is_queue(to: str) -> bool:
    return to.startswith(QUEUE_PREFIX)


def check_queue(store: MailStore, to: str, refuse_unknown: bool) -> str:
    """``to`` (``queue:NAME``) when mail may be sent to it; a queue with no member is unknown."""
    name = queue_name(to)
    if refuse_unknown and not store.queue_members(name):
        raise RecipientRefused(
            f"unknown queue {name!r}: no agent is a member "
            f"(add one with `agentmaild agents add NAME --queue {name}`)"
        )
    return to


def queue_name(to: str) -> str:
    name = to[len(QUEUE_PREFIX) :] if is_queue(to) else to
    try:
        return check_name(name, "queue")
    except ValidationError as exc:
        raise ValidationError(f"queue name: {exc.message}") from None


def names_to_join(queues: list[str], channel: str) -> list[str]:
    """The queue names, checked; only an agent the daemon delivers to can take queue work."""
    names = [queue_name(q) for q in queues]
    if names and channel == "pull":
        raise ValidationError(
            "--queue: queue work is handed out by the daemon; give the agent a --channel "
            "(spawn, stdin or tmux)"
        )
    return names


def join(store: MailStore, agent: str, names: list[str]) -> list[str]:
    for name in names:
        store.join_queue(name, agent)
    return names


def anycast_queue(store: MailStore, names: list[str]) -> str:
    """``--anycast @capability``: the address of the queue ``cap.<capability>``, whose members
    are the group's agents the daemon delivers to (``names``: the group as ``send`` expands it).

    They are joined at every anycast send, so an agent registered since then takes part from the
    next one on; pull agents cannot take queue work and are left out.
    """
    wanted = set(names)
    agents = [a for a in store.list_agents() if a.name in wanted and a.channel != "pull"]
    if not agents:
        raise RecipientRefused(
            "--anycast: no agent of this group is delivered to by the daemon "
            "(pull agents cannot take queue work)"
        )
    queue = f"cap.{agents[0].capability}"
    for a in agents:
        store.join_queue(queue, a.name)
    return QUEUE_PREFIX + queue
