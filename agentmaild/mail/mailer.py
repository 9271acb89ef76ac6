"""The mail rules on top of a MailStore: sending, groups, replies, idempotency, limits, nudges."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmaild.config import LimitsConfig, team_limits
from agentmaild.errors import NotFound, UnknownAgent, ValidationError
from agentmaild.ids import check_message_id, check_name, iso_now, new_id
from agentmaild.mail.vocab import DAEMON_SENDER as DAEMON_SENDER
from agentmaild.mail.vocab import IMPLICIT_RECIPIENTS as IMPLICIT_RECIPIENTS
from agentmaild.mail.vocab import OPERATOR as OPERATOR
from agentmaild.models import Message
from agentmaild.rules import recipients
from agentmaild.rules.content import Draft, check_content
from agentmaild.rules.queues import is_queue
from agentmaild.store import checks
from agentmaild.store.base import MailStore
from agentmaild.store.records import InsertRequest
from agentmaild.trust.peers import is_peer_address, split_peer_address

# The rules take the ``[limits]`` section as it is (defaults are the SPEC's); its team rules
# (``config.TEAM_RULES``) come from the store, never from the caller (``Mailer.rules``).
Limits = LimitsConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    messages: tuple[Message, ...]
    broadcast_id: str | None = None
    duplicate: bool = False

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.messages]

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": True,
            "ids": self.ids,
            "recipients": [m.to_agent for m in self.messages],
            "broadcast_id": self.broadcast_id,
            "duplicate": self.duplicate,
        }


class Mailer:
    """Applies SPEC §3 to a store. Stateless apart from the store and the caller's limits.

    ``limits``: the caller's own ``[limits]``; a send takes its team rules from the store instead
    (``rules``), so no sender's config or environment lifts a rule that protects the team.
    """

    def __init__(self, store: MailStore, limits: Limits | None = None) -> None:
        self.store = store
        self.limits = limits or Limits()

    def rules(self) -> Limits:
        """The limits a send is judged by: the store's team rules (its daemon's config; the
        built-in defaults while none was written) over the caller's other ``[limits]``."""
        return team_limits(self.store.team_rules(), self.limits)

    @property
    def _overstory(self) -> Any:
        """The store's Overstory project (a second registry, loose names), or None."""
        return self.store.overstory

    def expand(self, to: str, sender: str) -> tuple[list[str], bool]:
        """Recipients for ``to`` (a name or a group) and whether it was a group."""
        return recipients.expand(self.store, self.limits, to, sender)

    # -- sending ----------------------------------------------------------------------------
    def send(
        self,
        *,
        sender: str,
        to: str,
        subject: str,
        body: str,
        type: str = "status",
        priority: str = "normal",
        thread_id: str | None = None,
        payload: str | None = None,
        idempotency_key: str | None = None,
        peer_sender: bool = False,
    ) -> Sent:
        return self._send(self.rules(), sender=sender, to=to, subject=subject, body=body,
                          type=type, priority=priority, thread_id=thread_id, payload=payload,
                          idempotency_key=idempotency_key, peer_sender=peer_sender)  # fmt: skip

    def _send(self, limits: Limits, *, sender: str, to: str, subject: str, body: str, type: str,
              priority: str, thread_id: str | None, payload: str | None,
              idempotency_key: str | None, peer_sender: bool = False) -> Sent:  # fmt: skip
        """``send`` under ``limits`` (``rules()``, read once per send)."""
        self._check_sender(sender, peer_sender)
        canonical = check_content(limits, subject, body, type, priority, payload)
        if thread_id is not None:
            check_message_id(thread_id)
        idem = self._idempotency(
            sender, idempotency_key, to, subject, body, type, priority, thread_id, canonical
        )
        if idem is not None and (earlier := self._replay(idem)) is not None:
            return earlier
        names, is_group = self.expand(to, sender)
        checked, known = self._checked(to, is_group)
        draft = Draft(sender=sender, to=to, subject=subject, body=body, type=type,
                       priority=priority, thread_id=thread_id, payload=canonical)  # fmt: skip
        now = time.time()
        broadcast_id = new_id("bc") if is_group else None
        messages = draft.messages(names, iso_now(now), broadcast_id)
        # An idempotent retry is the sender's own business: never collapsed nor counted twice.
        guard = {} if idem is not None else self._guard(limits, draft, direct=not is_group)
        if thread_id is not None and "thread_guard" not in guard:
            self._refuse_held(thread_id, sender, names)  # else the insert checks its pair
        result = self.store.insert(
            InsertRequest(
                messages=messages,
                now=now,
                nudges=draft.nudges(messages),
                unread_max=limits.unread_max,
                rate_limit_max=limits.rate_limit_max,
                rate_limit_window_s=limits.rate_limit_window_s,
                idempotency=idem,
                check_recipients=checked,
                refuse_unknown=self.limits.refuse_unknown_recipients,
                known_elsewhere=known,
                **guard,
            )
        )
        if result.held:
            g = guard["thread_guard"]
            raise checks.held_error(g.thread_id, g.pair)
        bc = result.messages[0].broadcast_id if result.messages else broadcast_id
        return Sent(messages=result.messages, broadcast_id=bc, duplicate=result.duplicate)

    def _check_sender(self, sender: str, peer_sender: bool) -> None:
        if peer_sender:  # only a verified envelope (agentmaild.trust.receive) sends as a peer
            split_peer_address(sender)
        else:
            check_name(sender, "sender", loose=self._overstory is not None)

    def _replay(self, idem: tuple[str, str, str]) -> Sent | None:
        """What the first send with this key wrote, if it still stands for a retry."""
        # A retried send returns what the first one wrote, whatever happened since
        # (the recipient may have completed): the key is the sender's proof of identity.
        earlier = self.store.find_idempotent(*idem)
        if earlier is None or not checks.replays(earlier.messages):
            return None
        return Sent(
            messages=earlier.messages,
            duplicate=True,
            broadcast_id=earlier.messages[0].broadcast_id if earlier.messages else None,
        )

    def _checked(
        self, to: str, is_group: bool
    ) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]:
        """(the recipient the insert checks, what Overstory knows of it)."""
        # One recipient is checked inside the insert's transaction (group members were
        # filtered by state in expand()); the operator needs no registration.
        ov = self._overstory
        implicit = IMPLICIT_RECIPIENTS if ov is None else ov.implicit
        remote = is_queue(to) or is_peer_address(to)
        checked = () if is_group or to in implicit or remote else (to,)
        theirs = ov.state_of(to) if ov is not None and checked else None
        return checked, ((to, theirs),) if theirs is not None else ()

    def _refuse_held(self, thread_id: str, sender: str, names: Sequence[str]) -> None:
        """Refuse a send on a thread held for the sender and one of ``names`` (a group send, or
        one whose request carries no guard), with the guard's own words."""
        held = checks.held_pair(self.store.held_pairs(thread_id), sender, names)
        if held is not None:
            raise checks.held_error(thread_id, held)

    def _guard(self, limits: Limits, draft: Draft, *, direct: bool) -> dict[str, Any]:
        """The loop guard's fields of the insert (duplicate collapse, the ping-pong cap)."""
        from agentmaild.rules.loopguard import guard_fields

        return guard_fields(
            self.store,
            limits,
            sender=draft.sender,
            to=draft.to,
            subject=draft.subject,
            body=draft.body,
            thread_id=draft.thread_id,
            direct=direct,
            extra=(draft.type, draft.priority, draft.payload),
        )

    @staticmethod
    def _idempotency(
        sender: str, key: str | None, *content: str | None
    ) -> tuple[str, str, str] | None:
        if key is None:
            return None
        if not key or len(key) > 200:
            raise ValidationError("idempotency key: 1-200 characters")
        import hashlib  # here: OpenSSL's load would cost every cold send, most have no key

        digest = hashlib.sha256(json.dumps(list(content)).encode()).hexdigest()
        return (sender, key, digest)

    def reply(
        self,
        message_id: str,
        *,
        sender: str,
        body: str,
        type: str | None = None,
        priority: str | None = None,
        payload: str | None = None,
        idempotency_key: str | None = None,
    ) -> Sent:
        original = self.get(message_id)
        to = original.to_agent if sender == original.from_agent else original.from_agent
        subject = original.subject
        if not subject.lower().startswith("re: "):
            subject = "Re: " + subject
        limits = self.rules()
        subject = subject[: limits.subject_max_chars]
        msg_type = type or original.type
        if (
            type is None
            and payload is None
            and msg_type not in ("status", "question", "result", "error")
        ):
            # A protocol type without its payload would be invalid; a plain reply is a status.
            msg_type = "status"
        return self._send(
            limits,
            sender=sender,
            to=to,
            subject=subject,
            body=body,
            type=msg_type,
            priority=priority or original.priority,
            thread_id=original.thread_id or original.id,
            payload=payload,
            idempotency_key=idempotency_key,
        )

    def get(self, message_id: str) -> Message:
        check_message_id(message_id)
        found = self.store.get_message(message_id)
        if found is None:
            raise NotFound(f"no message {message_id}")
        return found

    def check_known(self, name: str) -> None:
        """Raise UnknownAgent unless ``name`` is registered, implicit (operator) or was mailed.

        With ``refuse_unknown_recipients = false`` any name may receive mail: none is unknown.
        """
        ov = self._overstory
        lookups = (
            lambda: ov is not None and (name in ov.implicit or ov.state_of(name) is not None),
            lambda: self.store.get_agent(name) is not None,
            lambda: self.store.list_messages(to_agent=name, limit=1),
        )
        if not checks.is_known(
            name, lookups=lookups, refuse_unknown=self.limits.refuse_unknown_recipients
        ):
            raise UnknownAgent(name)

    def non_delivery_report(self, agent: str, messages: Sequence[Message], reason: str) -> None:
        """Tell each original sender that their mail to ``agent`` became a dead letter."""
        by_sender: dict[str, list[Message]] = {}
        for m in messages:
            by_sender.setdefault(m.from_agent, []).append(m)
        now = time.time()
        for sender, lost in by_sender.items():
            lines = [f"- {m.id} {json.dumps(m.subject)}" for m in lost]
            body = (
                f"agentmaild could not deliver {len(lost)} message(s) to {agent}: {reason}\n"
                + "\n".join(lines)
                + f"\nThey are dead letters now; `agentmaild retry --agent {agent}` re-queues them."
            )
            report = Message(
                id=new_id("msg"),
                from_agent=DAEMON_SENDER,
                to_agent=sender,
                subject=f"Undeliverable: {len(lost)} message(s) to {agent}",
                body=body,
                type="error",
                priority="high",
                thread_id=lost[0].thread_id or lost[0].id,
                created_at=iso_now(now),
            )
            self.store.insert(
                InsertRequest(
                    messages=(report,), now=now, nudges=((sender, report.id, "high error"),)
                )
            )
