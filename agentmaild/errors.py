"""The one error tree of agentmaild; lower errors are mapped into it once, at each boundary.

    AgentmaildError                 code
    ├── UsageError                  usage         the command line lacks something (exit 2)
    ├── ConfigError                 config        a bad key or value; names the key
    ├── StoreError                  store         SQLite failed (disk full, corrupt, ...)
    │   └── NotFound                not_found     no such message / agent / delivery
    │       └── UnknownAgent        not_found     a name neither registered, implicit nor mailed
    ├── ChannelError                channel
    │   ├── AgentBusy               busy          turned busy between the check and the write
    │   ├── AgentUnavailable        unavailable   the agent cannot take mail now (pane gone, ...)
    │   └── DeliveryFailed          delivery_failed  the channel tried and the agent did not confirm
    ├── AccessError                 unauthorized  no valid bearer token (HTTP 401)
    │   └── Forbidden               forbidden     the token may not do this (HTTP 403)
    ├── ControlError                control
    │   ├── DaemonNotRunning        daemon_not_running
    │   ├── DaemonNotAnswering      daemon_not_answering  no connection or reply in time
    │   └── ProtocolError           protocol      malformed or oversized control traffic
    └── MailError                   mail
        ├── ValidationError         invalid       bad input (names the field)
        ├── RecipientRefused        recipient_refused  unknown, completed or zombie recipient
        ├── RateLimited             rate_limited  the from→to window is full
        ├── InboxFull               inbox_full    the recipient has too many unread messages
        ├── Conflict                conflict      idempotency key reused with other content
        ├── LoopHeld                loop_held     the loop guard holds this thread (team rules)
        ├── StateError              invalid_state an agent state transition the table forbids
        └── Untrusted               untrusted     a signed envelope failed a check (signature, …)

"Busy" is a result of ``is_busy()``; ``AgentBusy`` only reports the race where an agent turned
busy after that check, right before a channel would have typed (the batch is released uncounted).
"""

from __future__ import annotations


class AgentmaildError(Exception):
    """Base of every error agentmaild raises on purpose."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_json(self) -> dict[str, object]:
        return {"ok": False, "error": {"code": self.code, "message": self.message}}


class UsageError(AgentmaildError):
    """A command given without an option it needs (or with two that exclude each other).

    The CLI exits 2 for it, like the usage errors the argument parser reports itself.
    """

    code = "usage"


class ConfigError(AgentmaildError):
    code = "config"


class StoreError(AgentmaildError):
    code = "store"


class NotFound(StoreError):
    code = "not_found"


class UnknownAgent(NotFound):
    """Reading the mail of a name that is not registered, not ``operator`` and was never mailed."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown agent {name!r}: not registered and no mail was ever addressed to it "
            "(see `agentmaild agents list`; register it with `agentmaild agents add`)"
        )


class ChannelError(AgentmaildError):
    code = "channel"


class AgentBusy(ChannelError):
    code = "busy"


class AgentUnavailable(ChannelError):
    code = "unavailable"


class DeliveryFailed(ChannelError):
    code = "delivery_failed"


class AccessError(AgentmaildError):
    """The HTTP API refused a request's credentials: none, unknown, expired or revoked."""

    code = "unauthorized"


class Forbidden(AccessError):
    """A valid token asked for what its agent or scope does not allow."""

    code = "forbidden"


class ControlError(AgentmaildError):
    code = "control"


class DaemonNotRunning(ControlError):
    code = "daemon_not_running"


class DaemonNotAnswering(ControlError):
    code = "daemon_not_answering"


class ProtocolError(ControlError):
    code = "protocol"


class MailError(AgentmaildError):
    code = "mail"


class ValidationError(MailError):
    code = "invalid"


class RecipientRefused(MailError):
    code = "recipient_refused"


class RateLimited(MailError):
    code = "rate_limited"


class InboxFull(MailError):
    code = "inbox_full"


class Conflict(MailError):
    code = "conflict"


class LoopHeld(MailError):
    code = "loop_held"


class InterruptRefused(MailError):
    """Only the agent's parent, a lead or the operator may interrupt its turn."""

    code = "interrupt_refused"


class StateError(MailError):
    code = "invalid_state"


class Untrusted(MailError):
    """Mail from another trust domain that failed a check: signature, body hash, age, nonce."""

    code = "untrusted"


def one_line(text: str) -> str:
    """Control characters escaped, so an error is one line and cannot drive the terminal."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def report(exc: AgentmaildError, as_json: bool) -> int:
    """``exc`` as the typer-free commands print it, as the CLI does (its JSON object on stdout,
    else one ``error:`` line on stderr); the exit code: 2 for a usage error, else 1."""
    import json
    import sys

    if as_json:
        sys.stdout.write(json.dumps(exc.to_json()) + "\n")
    else:
        sys.stderr.write(f"error: {one_line(exc.message)}\n")
    return 2 if isinstance(exc, UsageError) else 1
