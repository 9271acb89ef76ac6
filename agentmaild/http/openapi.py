"""The OpenAPI 3.1 document of ``/v1`` (served at ``/v1/openapi.json``; a test checks that it
names exactly the app's routes and methods)."""

from __future__ import annotations

from typing import Any

from agentmaild import __version__

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "ok": {"const": False},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
_SUMMARY = {
    "type": "object",
    "properties": {
        k: {"type": t}
        for k, t in (("id", "string"), ("from", "string"), ("to", "string"), ("type", "string"),
                     ("priority", "string"), ("subject", "string"), ("created_at", "string"),
                     ("size", "integer"), ("read", "boolean"), ("body_length", "integer"))
    } | {"origin": {
        "description": "mail a peer domain's verified envelope delivered: that domain, the key "
                       "id its signature was checked against, the peer's own message id",
        "type": "object", "required": ["peer", "key_id", "origin_id"],
        "properties": {k: {"type": "string"} for k in ("peer", "key_id", "origin_id")},
    }},
}  # fmt: skip
_MESSAGE = {
    "allOf": [
        {"$ref": "#/components/schemas/Summary"},
        {
            "type": "object",
            "properties": {
                "body": {"type": "string"},
                "thread_id": {"type": ["string", "null"]},
                "payload": {},
                "broadcast_id": {"type": ["string", "null"]},
                "acked_by": {"type": ["string", "null"]},
                "acked_at": {"type": ["string", "null"]},
            },
        },
    ]
}
_SENT = {
    "type": "object",
    "properties": {
        "ok": {"const": True},
        "ids": {"type": "array", "items": {"type": "string"}},
        "recipients": {"type": "array", "items": {"type": "string"}},
        "broadcast_id": {"type": ["string", "null"]},
        "duplicate": {"type": "boolean"},
    },
}
_SEND = {
    "type": "object",
    "required": ["to", "subject"],
    "additionalProperties": False,
    "properties": {
        "to": {"type": "string", "description": "an agent, or a group such as @builders"},
        "subject": {"type": "string"},
        "body": {"type": "string"},
        "type": {"type": "string"},
        "priority": {"enum": ["low", "normal", "high", "urgent"]},
        "thread_id": {"type": "string"},
        "payload": {"description": "any JSON value; required by protocol types"},
        "payload_json": {"type": "string", "description": "the payload as JSON text instead"},
        "idempotency_key": {"type": "string", "maxLength": 200},
        "from": {"type": "string", "description": "operator tokens only; else the token's agent"},
    },
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _list_of(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"messages": {"type": "array", "items": _ref(name)}}}


def _op(summary: str, ok: dict[str, Any], *, status: str = "200", body: Any = None,
        params: tuple[tuple[str, str, bool], ...] = (), auth: bool = True) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {status: {"description": "success", **_json(ok)},
                      "default": {"description": "an error", **_json(_ref("Error"))}},
    }  # fmt: skip
    if params:
        op["parameters"] = [
            {"name": n, "in": where, "required": req, "schema": {"type": "string"}}
            for n, where, req in params
        ]
    if body is not None:
        op["requestBody"] = {"required": True, **_json(body)}
    if not auth:
        op["security"] = []
    return op


_ID = ("id", "path", True)


def document() -> dict[str, Any]:
    ids = {"type": "object", "required": ["ids"],
           "properties": {"ids": {"type": "array", "items": {"type": "string"}}}}  # fmt: skip
    take = {"type": "object", "properties": {"agent": {"type": "string"},
                                             "inject": {"type": "boolean"}}}  # fmt: skip
    hook = {"type": "object", "properties": {"agent": {"type": "string"},
                                             "input": {"type": "string"},
                                             "quiet": {"type": "boolean"},
                                             "vendor": {"type": "string"}}}  # fmt: skip
    relay = {"type": "object", "required": ["version", "envelope", "signature", "key_id", "body"],
             "properties": {"version": {"const": 3}}}  # fmt: skip
    reply = {k: v for k, v in _SEND.items() if k != "required"}
    reply["required"] = ["body"]
    reply["properties"] = {k: v for k, v in _SEND["properties"].items()  # type: ignore[attr-defined]
                           if k not in ("to", "subject", "thread_id")}  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "agentmaild mail API", "version": __version__},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": _ERROR, "Summary": _SUMMARY, "Message": _MESSAGE, "Sent": _SENT},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/health": {"get": _op("Liveness", {"type": "object"}, auth=False)},
            "/v1/openapi.json": {"get": _op("This document", {"type": "object"}, auth=False)},
            "/v1/inbox": {"get": _op("Probe an inbox: metadata only", _list_of("Summary"),
                                     params=(("agent", "query", False),
                                             ("unread", "query", False)))},
            "/v1/inbox/take": {"post": _op("Take unread mail and mark it read (check)",
                                           {"type": "object"}, body=take)},
            "/v1/messages": {
                "get": _op("List messages, newest first", _list_of("Summary"),
                           params=(("from", "query", False), ("to", "query", False),
                                   ("type", "query", False), ("unread", "query", False),
                                   ("limit", "query", False))),
                "post": _op("Send", _ref("Sent"), status="201", body=_SEND),
            },
            "/v1/messages/{id}": {"get": _op("Fetch a whole message (no state change)",
                                             {"type": "object",
                                              "properties": {"message": _ref("Message")}},
                                             params=(_ID,))},
            "/v1/messages/{id}/reply": {"post": _op("Reply in the thread", _ref("Sent"),
                                                    status="201", body=reply, params=(_ID,))},
            "/v1/ack": {"post": _op("Mark read (idempotent)", {"type": "object"}, body=ids)},
            "/v1/hooks/{event}": {"post": _op("Run a Claude Code hook event on the store",
                                              {"type": "object"}, body=hook,
                                              params=(("event", "path", True),))},
            "/v1/threads/{id}": {"get": _op("A thread, oldest first", _list_of("Message"),
                                            params=(_ID,))},
            "/v1/relay": {"post": _op("Mail from a peer domain: a signed envelope (no token)",
                                      {"type": "object"}, body=relay, auth=False)},
        },
    }  # fmt: skip
