"""Loopback stand-ins for the two OpenAI API shapes the vendor CLIs speak.

* ``ResponsesApi`` — ``POST /v1/responses`` with ``stream: true`` (Codex): SSE
  ``response.created`` → ``response.output_item.added`` → ``response.output_text.delta`` →
  ``response.output_item.done`` → ``response.completed`` (with usage).
* ``ChatCompletionsApi`` — ``POST /v1/chat/completions`` streamed (OpenCode through
  ``@ai-sdk/openai-compatible``): ``chat.completion.chunk`` frames, a finish chunk with usage,
  ``data: [DONE]``.

Both answer ``GET /v1/models`` with one model and record everything else with a 404. Controls and
inspection: see ``loopback_api``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from tests.support.loopback_api import LoopbackApi, RecordedRequest, _Handler

MODEL = "stand-in-model"


def _content_texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            yield part["text"]


def _models(handler: _Handler, req: RecordedRequest) -> bool:
    if req.route.rstrip("/") in ("/v1/models", "/models"):
        handler.send_json(
            req,
            200,
            {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "x"}]},
        )
        return True
    return False


def _sse(events: Iterable[dict[str, Any]], *, named: bool) -> Iterator[str]:
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        yield f"{head}data: {json.dumps(event)}\n\n"


ToolCall = tuple[str, dict[str, Any]]  # (function name, arguments)


class ResponsesApi(LoopbackApi):
    """The OpenAI Responses API, streaming, as Codex calls it.

    ``tool_call(req)``, when set and returning (name, arguments), answers with that one
    ``function_call`` item instead of text (``NAMESPACE/NAME``: a tool of a namespace)."""

    name = "responses"
    tool_call: Any = None

    def classify(self, req: RecordedRequest) -> None:
        req.model_call = req.method == "POST" and req.route.endswith("/responses")
        body = req.body if isinstance(req.body, dict) else {}
        items = body.get("input")
        if isinstance(items, str):
            req.texts = [("user", items)]
            return
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type", "message") == "message":
                role = str(item.get("role") or "")
                req.texts.extend((role, t) for t in _content_texts(item.get("content")))

    def answer(self, handler: _Handler, req: RecordedRequest) -> None:
        if _models(handler, req):
            return
        if not req.model_call:
            handler.send_json(req, 404, {"error": {"message": f"no route {req.route}"}})
            return
        handler.send_sse(req, _sse(self._events(req), named=True))

    def _events(self, req: RecordedRequest) -> Iterator[dict[str, Any]]:
        text = self.reply_text(req)
        rid, mid = f"resp_{uuid.uuid4().hex[:16]}", f"msg_{uuid.uuid4().hex[:16]}"
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": MODEL}
        call: ToolCall | None = self.tool_call(req) if self.tool_call is not None else None
        done_item: dict[str, Any] = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        if call is not None:
            namespace, _, name = call[0].rpartition("/")  # "NAMESPACE/NAME": a namespaced tool
            done_item = {"id": f"fc_{mid[4:]}", "type": "function_call", "status": "completed",
                         "call_id": f"call_{mid[4:]}", "name": name,
                         "arguments": json.dumps(call[1])}  # fmt: skip
            if namespace:
                done_item["namespace"] = namespace
        yield {"type": "response.created", "response": {**base, "status": "in_progress"}}
        added = {**done_item, "status": "in_progress"}
        added.update({"content": []} if call is None else {"arguments": ""})
        yield {"type": "response.output_item.added", "output_index": 0, "item": added}
        if call is None:
            yield {
                "type": "response.output_text.delta",
                "item_id": mid,
                "output_index": 0,
                "content_index": 0,
                "delta": text,
            }
        yield {"type": "response.output_item.done", "output_index": 0, "item": done_item}
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        completed = {**base, "status": "completed", "output": [done_item], "usage": usage}
        yield {"type": "response.completed", "response": completed}


class ChatCompletionsApi(LoopbackApi):
    """The OpenAI Chat Completions API, streaming, as OpenAI-compatible clients call it.

    ``tool_call(req)``, when set and returning (name, arguments), answers with that one function
    call (``finish_reason: tool_calls``) instead of text."""

    name = "chat"
    tool_call: Any = None

    def classify(self, req: RecordedRequest) -> None:
        req.model_call = req.method == "POST" and req.route.endswith("/chat/completions")
        body = req.body if isinstance(req.body, dict) else {}
        messages = body.get("messages")
        for msg in messages if isinstance(messages, list) else []:
            if isinstance(msg, dict):
                role = str(msg.get("role") or "")
                req.texts.extend((role, t) for t in _content_texts(msg.get("content")))

    def answer(self, handler: _Handler, req: RecordedRequest) -> None:
        if _models(handler, req):
            return
        if not req.model_call:
            handler.send_json(req, 404, {"error": {"message": f"no route {req.route}"}})
            return
        body = req.body if isinstance(req.body, dict) else {}
        chunks = list(self._chunks(req))
        if body.get("stream"):
            handler.send_sse(req, [*_sse(chunks, named=False), "data: [DONE]\n\n"])
            return
        message = {"role": "assistant", "content": self.reply_text(req)}
        whole = {**chunks[0], "object": "chat.completion", "usage": chunks[-1]["usage"]}
        whole["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
        handler.send_json(req, 200, whole)

    def _chunks(self, req: RecordedRequest) -> Iterator[dict[str, Any]]:
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": MODEL,
        }
        call: ToolCall | None = self.tool_call(req) if self.tool_call is not None else None
        finish = "stop"
        if call is None:
            delta: dict[str, Any] = {"role": "assistant", "content": self.reply_text(req)}
        else:
            function = {"name": call[0], "arguments": json.dumps(call[1])}
            delta = {"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                 "function": function}]}  # fmt: skip
            finish = "tool_calls"
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        yield {
            **base,
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            "usage": usage,
        }
