"""Payload schemas of the 10 protocol message types, validated (errors name the field)."""

from __future__ import annotations

import json
from typing import Any

from agentmaild.errors import ValidationError
from agentmaild.mail.jsoninput import JsonInputError, loads_strict

# field -> (kind, required). Kinds: str, int, bool, str[], str? (nullable), or a tuple of choices.
Schema = dict[str, tuple[Any, bool]]

SCHEMAS: dict[str, Schema] = {
    "worker_done": {
        "taskId": ("str", True),
        "branch": ("str", True),
        "exitCode": ("int", True),
        "filesModified": ("str[]", True),
    },
    "worker_died": {
        "agentName": ("str", True),
        "reason": ("str", True),
        "taskId": ("str?", False),
        "exitCode": ("int", False),
    },
    "merge_ready": {
        "branch": ("str", True),
        "taskId": ("str", True),
        "agentName": ("str", True),
        "filesModified": ("str[]", True),
    },
    "merged": {
        "branch": ("str", True),
        "taskId": ("str", True),
        "tier": (("clean-merge", "auto-resolve", "ai-resolve", "reimagine"), True),
    },
    "merge_failed": {
        "branch": ("str", True),
        "taskId": ("str", True),
        "conflictFiles": ("str[]", True),
        "errorMessage": ("str", True),
    },
    "escalation": {
        "severity": (("warning", "error", "critical"), True),
        "taskId": ("str?", True),
        "context": ("str", True),
    },
    "health_check": {
        "agentName": ("str", True),
        "checkType": (("liveness", "readiness"), True),
    },
    "dispatch": {
        "taskId": ("str", True),
        "specPath": ("str", True),
        "capability": ("str", True),
        "fileScope": ("str[]", True),
        "skipScouts": ("bool", False),
        "skipReview": ("bool", False),
        "maxAgents": ("int", False),
    },
    "assign": {
        "taskId": ("str", True),
        "specPath": ("str", True),
        "workerName": ("str", True),
        "branch": ("str", True),
    },
    "decision_gate": {
        "options": ("str[]", True),
        "context": ("str", True),
        "deadline": ("str", False),
    },
}

_KIND_NAMES = {
    "str": "a string",
    "int": "an integer",
    "bool": "true or false",
    "str[]": "a list of strings",
    "str?": "a string or null",
}


def _ok(kind: Any, value: Any) -> bool:
    if isinstance(kind, tuple):
        return value in kind
    if kind == "str":
        return isinstance(value, str)
    if kind == "str?":
        return value is None or isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _expected(kind: Any) -> str:
    if isinstance(kind, tuple):
        return "one of " + ", ".join(kind)
    return _KIND_NAMES[kind]


def validate_payload(msg_type: str, raw: str | None, max_bytes: int) -> str | None:
    """Check ``raw`` (JSON text) for ``msg_type``; return it in canonical compact form."""
    if raw is None or raw == "":
        if msg_type in SCHEMAS:
            fields = ", ".join(f for f, (_, req) in SCHEMAS[msg_type].items() if req)
            raise ValidationError(f"payload: type {msg_type} needs a JSON payload with {fields}")
        return None
    if len(raw.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ValidationError(f"payload: larger than {max_bytes} bytes")
    try:
        # Strict: NaN/Infinity/1e999, digit-limit integers, deep nesting and lone surrogates
        # are refused here, not found later by json.dumps, SQLite or the terminal.
        value = loads_strict(raw)
    except JsonInputError as exc:
        raise ValidationError(f"payload: {exc.message}") from None
    schema = SCHEMAS.get(msg_type)
    if schema is not None:
        _check(msg_type, schema, value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _check(msg_type: str, schema: Schema, value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError(f"payload: type {msg_type} needs a JSON object")
    for name, (kind, required) in schema.items():
        if name not in value:
            if required:
                raise ValidationError(f"payload.{name}: required for type {msg_type}")
            continue
        if not _ok(kind, value[name]):
            raise ValidationError(
                f"payload.{name}: expected {_expected(kind)}, got {json.dumps(value[name])[:60]}"
            )
