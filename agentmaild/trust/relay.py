"""Forwarding mail addressed to ``peer:NAME/agent`` to that peer's ``POST /v1/relay``.

At least once: a message is marked relayed only after the peer answered 200; a relay killed in
between sends it again with a fresh envelope (new nonce, new time), and the peer returns its first
delivery (its idempotency key is the message id, signed in the envelope), so nothing arrives twice.
Stdlib HTTP.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from agentmaild.errors import AgentmaildError, Untrusted
from agentmaild.models import Message
from agentmaild.store.base import MailStore
from agentmaild.trust import envelope
from agentmaild.trust.keyfile import DomainKey
from agentmaild.trust.peers import split_peer_address
from agentmaild.trust.receive import wire

TIMEOUT_S = 10.0


@dataclass
class PassReport:
    relayed: list[str]
    failed: list[tuple[str, str]]  # (message id, the peer's or the network's error)


def _post(url: str, data: dict[str, object]) -> None:
    request = urllib.request.Request(
        url.rstrip("/") + "/v1/relay", data=json.dumps(data).encode(), method="POST",
        headers={"content-type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code}"
        raise Untrusted(f"{url}: refused: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AgentmaildError(f"{url}: not reachable ({reason})") from None


def relay_one(key: DomainKey, url: str, m: Message) -> None:
    """Sign ``m`` for ``peer:NAME/agent`` (the whole address: the peer checks it is NAME) and
    post it to ``url``."""
    env = envelope.seal(from_agent=m.from_agent, to_agent=m.to_agent, subject=m.subject,
                        body=m.body, payload=m.payload, created_at=time.time(),
                        domain=key.domain, message_id=m.id)  # fmt: skip
    _post(url, wire(env, envelope.sign(key.key, env), key.key_id, m.body))


def relay_pass(
    store: MailStore, key: DomainKey, *, to: str | None, peer: str | None, limit: int = 100
) -> PassReport:
    """One pass over the pending peer mail; each message to its peer's URL (or ``to``)."""
    report = PassReport([], [])
    for m in store.relay_pending(limit):
        name, _ = split_peer_address(m.to_agent)
        if peer is not None and name != peer:
            continue
        known = store.find_peer(name)
        url = to or (known.url if known is not None else None)
        if not url:
            report.failed.append((m.id, f"no URL for peer {name!r} (peers add --url, or --to)"))
            continue
        try:
            relay_one(key, url, m)
        except AgentmaildError as exc:
            report.failed.append((m.id, str(exc)))
            continue
        store.mark_relayed(m.id, peer=name, at=time.time())
        report.relayed.append(m.id)
    return report
