"""The MCP tools' names, one-line descriptions (written for a model) and input schemas, and the
check of a call's arguments against them: a wrong type, a missing field or one the schema does
not name (``from`` among them: the server's identity is fixed) is a ``ValidationError`` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentmaild.errors import ValidationError
from agentmaild.mail.vocab import MESSAGE_TYPES, PRIORITIES


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...] = ()

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": self.properties,
            "required": list(self.required),
            "additionalProperties": False,
        }


def _text(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


_ID = _text("A message id (msg-…).")
_BODY = _text("The message text.")
_TYPE = _text("Message type; protocol types need a payload.", enum=list(MESSAGE_TYPES))
_PRIORITY = _text("Priority.", enum=list(PRIORITIES))
_PAYLOAD = {"type": "object", "description": "JSON payload (required for protocol types)."}
ACK_MAX = 1000  # a call's answer names each id: a bound on the answer as on the call
_IDEM = _text("Same key and content again: the same ids, nothing sent twice.")

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "send",
        "Send mail to a teammate (name, @group, queue:NAME or peer:DOMAIN/agent) as yourself.",
        {
            "to": _text("Recipient: an agent, @group, queue:NAME or peer:DOMAIN/agent."),
            "subject": _text("One line."),
            "body": _BODY,
            "type": _TYPE,
            "priority": _PRIORITY,
            "thread": _text("Thread id to continue (a message id)."),
            "payload": _PAYLOAD,
            "idempotency_key": _IDEM,
        },
        ("to", "subject"),
    ),
    ToolSpec(
        "reply",
        "Reply in a message's thread (to its sender, or from its sender to its recipient).",
        {
            "id": _ID,
            "body": _BODY,
            "type": _TYPE,
            "priority": _PRIORITY,
            "payload": _PAYLOAD,
            "idempotency_key": _IDEM,
        },
        ("id", "body"),
    ),
    ToolSpec(
        "inbox",
        "List your mail: metadata only, no bodies, nothing marked read.",
        {"unread": {"type": "boolean", "description": "Unread only (default true)."}},
    ),
    ToolSpec(
        "read",
        "Fetch one whole message by id without marking it read (use ack after).",
        {"id": _ID},
        ("id",),
    ),
    ToolSpec(
        "ack",
        "Mark messages read; ids already read or unknown are reported, not errors.",
        {
            "ids": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": ACK_MAX,
                "description": f"Message ids to mark read (at most {ACK_MAX}).",
            }
        },
        ("ids",),
    ),
    ToolSpec(
        "check",
        "Fetch all your unread mail, priority first, and mark it read.",
        {},
    ),
    ToolSpec(
        "ask",
        "Ask one agent a question and wait for its reply (up to timeout_s seconds).",
        {
            "to": _text("Who should answer (one agent)."),
            "subject": _text("One line."),
            "body": _text("The question."),
            "priority": _PRIORITY,
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 3600,
                "description": "Seconds to wait (default 600).",
            },
        },
        ("to", "subject", "body"),
    ),
    ToolSpec(
        "team",
        "List the team: each agent's role, parent, member and exec status, busy and unread.",
        {},
    ),
    ToolSpec(
        "thread",
        "Show a whole thread, oldest first, from its id or any message in it.",
        {"id": _ID},
        ("id",),
    ),
)
BY_NAME = {t.name: t for t in TOOLS}

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "boolean": (bool,), "object": (dict,), "array": (list,),
    "number": (int, float),
}  # fmt: skip


def _check_value(name: str, spec: dict[str, Any], value: Any) -> None:
    want = spec["type"]
    ok = isinstance(value, _JSON_TYPES[want]) and not (want == "number" and isinstance(value, bool))
    if not ok:
        raise ValidationError(f"{name}: expected {want}, got {type(value).__name__}")
    if "enum" in spec and value not in spec["enum"]:
        raise ValidationError(f"{name}: {value!r} is not one of {', '.join(spec['enum'])}")
    if want == "array":
        if len(value) < spec.get("minItems", 0):
            raise ValidationError(f"{name}: expected at least {spec['minItems']} item(s)")
        if len(value) > spec.get("maxItems", len(value)):
            raise ValidationError(f"{name}: {len(value)} items, at most {spec['maxItems']}")
        for i, item in enumerate(value):
            _check_value(f"{name}[{i}]", spec["items"], item)
    if want == "number" and (value <= spec.get("exclusiveMinimum", float("-inf"))
                             or value > spec.get("maximum", float("inf"))):  # fmt: skip
        raise ValidationError(f"{name}: {value} is out of range")


def checked_arguments(
    tool: ToolSpec, arguments: dict[str, Any] | None, agent: str
) -> dict[str, Any]:
    """The call's arguments, each checked against ``tool``'s schema."""
    args = dict(arguments or {})
    for name in args:
        if name not in tool.properties:
            if name in ("from", "sender", "agent", "from_agent"):
                raise ValidationError(
                    f"{name}: this server acts as {agent!r} only; the sender is not an argument"
                )
            raise ValidationError(f"{name}: not an argument of {tool.name}")
    for name in tool.required:
        if args.get(name) is None:
            raise ValidationError(f"{name}: required by {tool.name}")
    for name, value in args.items():
        if value is not None:
            _check_value(name, tool.properties[name], value)
    return {k: v for k, v in args.items() if v is not None}
