"""The loopback model-API stand-ins answer in each vendor's shape, log every request, fail on
request (500/429) and can be slow — checked over real HTTP on loopback."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.support.gemini_stub import GeminiApi
from tests.support.openai_stub import ChatCompletionsApi, ResponsesApi


def post(url: str, body: dict[str, Any]) -> tuple[int, str, dict[str, str]]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def sse_data(text: str) -> list[Any]:
    lines = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    return [json.loads(x) for x in lines if x != "[DONE]"]


def test_responses_stream_failures_and_delay() -> None:
    with ResponsesApi("hello there", delay_s=0.3) as api:
        body = {"model": "m", "stream": True, "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Q1"}]}
        ]}  # fmt: skip
        started = time.monotonic()
        status, text, _ = post(f"{api.base_url}/v1/responses", body)
        assert status == 200 and time.monotonic() - started >= 0.3
        events = sse_data(text)
        assert events[0]["type"] == "response.created"
        assert events[-1]["type"] == "response.completed"
        assert events[-1]["response"]["output"][0]["content"][0]["text"] == "hello there"
        api.delay_s = 0
        api.fail_next(1, status=429)
        status, _, headers = post(f"{api.base_url}/v1/responses", body)
        assert status == 429 and headers["Retry-After"] == "0"
        assert [r.answered_with for r in api.conversation_requests("Q1")] == [200, 429]


def test_chat_completions_stream_and_500() -> None:
    with ChatCompletionsApi("chat answer") as api:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Q2"}]}
        api.fail_next(1, status=500)
        assert post(f"{api.base_url}/v1/chat/completions", body)[0] == 500
        status, text, _ = post(f"{api.base_url}/v1/chat/completions", body)
        assert status == 200 and text.rstrip().endswith("data: [DONE]")
        chunks = sse_data(text)
        assert chunks[0]["choices"][0]["delta"]["content"] == "chat answer"
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
        assert api.wait_for("Q2").route == "/v1/chat/completions"


@pytest.mark.parametrize("schema_key", ["responseJsonSchema", "responseSchema"])
def test_gemini_router_call_gets_the_fields_it_asks_for(schema_key: str) -> None:
    schema = {"type": "object", "properties": {
        "complexity_reasoning": {"type": "string"},
        "complexity_score": {"type": "integer", "minimum": 1},
    }}  # fmt: skip
    with GeminiApi("gemini answer") as api:
        body = {"contents": [{"role": "user", "parts": [{"text": "Q3"}]}],
                "generationConfig": {schema_key: schema}}  # fmt: skip
        status, text, _ = post(f"{api.base_url}/v1beta/models/m:generateContent", body)
        answer = json.loads(json.loads(text)["candidates"][0]["content"]["parts"][0]["text"])
        assert status == 200 and answer["complexity_score"] == 1
        assert "complexity_reasoning" in answer
        api.fail_next(1, status=500)  # model calls only: the router call is never failed
        url = f"{api.base_url}/v1beta/models/m:streamGenerateContent?alt=sse"
        status, text, _ = post(url, {"contents": body["contents"]})
        assert status == 500 and json.loads(text)["error"]["status"] == "INTERNAL"
        status, text, _ = post(url, {"contents": body["contents"]})
        (frame,) = sse_data(text)
        assert frame["candidates"][0]["content"]["parts"][0]["text"] == "gemini answer"
        assert [r.route.rsplit(":", 1)[1] for r in api.requests] == [
            "generateContent", "streamGenerateContent", "streamGenerateContent"
        ]  # fmt: skip
