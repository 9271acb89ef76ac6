"""A loopback stand-in for the Gemini API as Gemini CLI calls it (``GOOGLE_GEMINI_BASE_URL``).

* ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` — the turn itself (a *model call*
  in ``loopback_api`` terms: held, delayed, failed on request): SSE ``data:`` frames of
  ``GenerateContentResponse`` with the reply text, the last one with ``finishReason: STOP`` and
  ``usageMetadata``.
* ``POST …:generateContent`` — side calls that ask for JSON (the model router wants
  ``complexity_reasoning`` + ``complexity_score``, the next-speaker check wants ``next_speaker``):
  answered with an object built from the request's response schema, so whatever fields the CLI
  asks for are there. Recorded, never failed or held.
* ``…:countTokens`` and ``GET …/models`` get small answers; the rest is recorded and 404'd.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.support.loopback_api import Failure, LoopbackApi, RecordedRequest, _Handler

MODEL_VERSION = "gemini-stand-in"
_STATUS = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def schema_value(schema: Any) -> Any:
    """A value that satisfies a (JSON or OpenAPI-style) response schema, kept small."""
    if not isinstance(schema, dict):
        return "stand-in"
    kind = str(schema.get("type") or "").lower()
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return "user" if "user" in enum else enum[0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {key: schema_value(sub) for key, sub in props.items()}
    if kind in ("number", "integer"):
        low = schema.get("minimum")
        return low if isinstance(low, int | float) else 1
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    return "stand-in"


class GeminiApi(LoopbackApi):
    """Gemini ``generateContent`` / ``streamGenerateContent`` on loopback.

    ``tool_call(req)``, when set and returning (name, arguments), answers the turn with that one
    ``functionCall`` part instead of text."""

    name = "gemini"
    tool_call: Any = None

    def classify(self, req: RecordedRequest) -> None:
        req.model_call = req.method == "POST" and ":streamGenerateContent" in req.route
        body = req.body if isinstance(req.body, dict) else {}
        contents = body.get("contents")
        for content in contents if isinstance(contents, list) else []:
            if not isinstance(content, dict):
                continue
            role = "assistant" if content.get("role") == "model" else str(content.get("role"))
            for part in content.get("parts") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    req.texts.append((role, part["text"]))

    def error_body(self, failure: Failure) -> Any:
        status = _STATUS.get(failure.status, "UNKNOWN")
        return {"error": {"code": failure.status, "message": failure.message, "status": status}}

    def side_calls(self) -> list[RecordedRequest]:
        """The ``generateContent`` calls (router, next-speaker checks, …)."""
        return [r for r in self.requests if r.route.endswith(":generateContent")]

    def answer(self, handler: _Handler, req: RecordedRequest) -> None:
        route = req.route
        if req.model_call:
            handler.send_sse(req, self._frames(req))
        elif route.endswith(":generateContent"):
            handler.send_json(req, 200, self._json_answer(req))
        elif route.endswith(":countTokens"):
            handler.send_json(req, 200, {"totalTokens": 10})
        elif req.method == "GET" and route.rstrip("/").endswith("/models"):
            handler.send_json(req, 200, {"models": []})
        else:
            handler.send_json(req, 404, self.error_body(Failure(404, f"no route {route}")))

    def _json_answer(self, req: RecordedRequest) -> dict[str, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema is not None:
            text = json.dumps(schema_value(schema))
        else:
            text = self.reply_text(req)
        return _response(text, final=True)

    def _frames(self, req: RecordedRequest) -> Iterator[str]:
        call = self.tool_call(req) if self.tool_call is not None else None
        answer = _response(self.reply_text(req), final=True)
        if call is not None:
            part = {"functionCall": {"name": call[0], "args": call[1]}}
            answer["candidates"][0]["content"]["parts"] = [part]
        yield f"data: {json.dumps(answer)}\r\n\r\n"


def _response(text: str, *, final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "index": 0,
    }
    answer: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL_VERSION}
    if final:
        candidate["finishReason"] = "STOP"
        answer["usageMetadata"] = {
            "promptTokenCount": 10,
            "candidatesTokenCount": 5,
            "totalTokenCount": 15,
        }
    return answer
