"""channels/usage.py on the events the pinned CLIs printed against the loopback stand-ins
(captured from Claude Code, Codex, Gemini CLI and OpenCode; trimmed to what the reader looks at and
a few neighbours), and the spawn channel's turn reader feeding it."""

from __future__ import annotations

import json

import pytest

from agentmaild.channels.spawn import StreamJsonEvents
from agentmaild.channels.usage import Usage, UsageMeter, read_event
from agentmaild.procs.lines import Line

CLAUDE = [
    '{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text":'
    ' "ok"}], "usage": {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0,'
    ' "cache_read_input_tokens": 0}}, "session_id": "3b92b7be"}',
    '{"duration_api_ms": 49, "stop_reason": "end_turn", "session_id": "3b92b7be", "total_cost_usd":'
    ' 0.00014000000000000001, "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0,'
    ' "cache_read_input_tokens": 0, "output_tokens": 5, "output_tokens_details":'
    ' {"thinking_tokens": 0}, "service_tier": "standard"}, "modelUsage": {"claude-opus-5-5":'
    ' {"inputTokens": 10,'
    ' "outputTokens": 5, "costUSD": 0.00014000000000000001}}, "is_error": false, "num_turns": 1,'
    ' "subtype": "success", "result": "ok", "type": "result"}',
]
CODEX = [
    '{"type":"thread.started","thread_id":"01a24149-9935-7fd2-812c-55b572b2d3d7"}',
    '{"type":"turn.started"}',
    '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"ok"}}',
    '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,'
    '"cache_write_input_tokens":0,"output_tokens":5,"reasoning_output_tokens":0}}',
]
GEMINI = [
    '{"type":"init","timestamp":"2026-12-04T13:41:18.273Z","session_id":"b44a0321","model":"auto"}',
    '{"type":"message","role":"assistant","content":"ok","delta":true}',
    '{"type":"result","timestamp":"2026-12-04T13:41:18.548Z","status":"success","stats":'
    '{"total_tokens":30,"input_tokens":20,"output_tokens":10,"cached":0,"input":20,'
    '"duration_ms":276,"tool_calls":0,"models":{"gemini-stand-in":{"total_tokens":30}}}}',
]
OPENCODE = [
    '{"type":"step_start","sessionID":"ses_dbeb","part":{"type":"step-start"}}',
    '{"type":"text","sessionID":"ses_dbeb","part":{"type":"text","text":"ok"}}',
    '{"type":"step_finish","sessionID":"ses_dbeb","part":{"reason":"stop","type":"step-finish",'
    '"tokens":{"total":15,"input":10,"output":5,"reasoning":0,"cache":{"write":0,"read":0}},'
    '"cost":0}}',
]


def turn(lines: list[str]) -> Usage | None:
    events = StreamJsonEvents()
    for text in lines:
        events.feed(Line(data=text.encode()))
    return events.usage.total()


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (CLAUDE, Usage(10, 5, 0.00014000000000000001)),  # the result's, not the message's
        (CODEX, Usage(10, 5, None)),
        (GEMINI, Usage(20, 10, None)),
        (OPENCODE, Usage(10, 5, 0.0)),
    ],
    ids=["claude", "codex", "gemini", "opencode"],
)
def test_each_vendors_turn_reports_its_usage(lines: list[str], expected: Usage) -> None:
    assert turn(lines) == expected


def test_cache_tokens_and_steps_add_up() -> None:
    claude = json.loads(CLAUDE[1])
    claude["usage"].update(cache_creation_input_tokens=7, cache_read_input_tokens=100)
    assert read_event(claude) == Usage(117, 5, 0.00014000000000000001)
    step = json.loads(OPENCODE[2])
    step["part"].update(cost=0.25, tokens={"input": 3, "output": 2, "reasoning": 4,
                                           "cache": {"read": 10, "write": 1}})  # fmt: skip
    meter = UsageMeter()
    meter.feed(step)
    meter.feed(step)
    assert meter.total() == Usage(28, 12, 0.5)


def test_a_long_lived_claudes_price_is_the_turns_not_the_sessions() -> None:
    # Its second turn, as the pinned CLI printed it on the stdin channel: total_cost_usd has grown
    # with the session, model_usage_since_last_result is this turn's.
    second = json.loads(CLAUDE[1])
    second.update(total_cost_usd=0.00028, model_usage_since_last_result={
        "claude-opus-5-5": {"inputTokens": 10, "outputTokens": 5, "costUSD": 0.00014}})  # fmt: skip
    assert read_event(second) == Usage(10, 5, 0.00014)


def test_no_usage_is_none_and_odd_values_count_nothing() -> None:
    assert turn(CODEX[:3]) is None  # a turn that died before turn.completed
    assert turn(["not json", "", '{"type": "result", "is_error": true}']) is None
    odd = {"type": "result", "usage": {"input_tokens": True, "output_tokens": -4},
           "total_cost_usd": "1.0"}  # fmt: skip
    assert read_event(odd) == Usage(0, 0, None)
    assert read_event({"type": "step_finish", "part": "x"}) is None


# The long-lived channels' events, as the pinned CLIs sent them to the daemon.
CODEX_APP = (
    '{"method":"thread/tokenUsage/updated","params":{"threadId":"01a24192","turnId":"01a24192-8ea4",'
    '"tokenUsage":{"total":{"totalTokens":15,"inputTokens":10,"cachedInputTokens":0,'
    '"cacheWriteInputTokens":0,"outputTokens":5,"reasoningOutputTokens":0},"last":{"totalTokens":'
    '15,"inputTokens":10,"cachedInputTokens":0,"cacheWriteInputTokens":0,"outputTokens":5,'
    '"reasoningOutputTokens":0},"modelContextWindow":258400}}}'
)
ACP_OPENCODE = (
    '{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15},'
    '"_meta":{}}'
)
ACP_GEMINI = (
    '{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":10,"output_tokens":'
    '5},"model_usage":[{"model":"gemini-3.8-flash","token_count":{"input_tokens":10,'
    '"output_tokens":5}}]}}}'
)
OPENCODE_SERVE = (
    '{"id":"evt_2419","type":"message.part.updated","properties":{"sessionID":"ses_dbe6","part":'
    '{"id":"prt_2419","reason":"stop","messageID":"msg_2419","sessionID":"ses_dbe6","type":'
    '"step-finish","tokens":{"total":15,"input":10,"output":5,"reasoning":0,"cache":{"write":0,'
    '"read":0}},"cost":0},"time":1796396512971}}'
)


def meter_of(*events: dict[str, object]) -> Usage | None:
    meter = UsageMeter()
    for event in events:
        meter.feed(event)
    return meter.total()


def test_the_long_lived_channels_events_report_the_turns_usage() -> None:
    assert meter_of(json.loads(CODEX_APP)) == Usage(10, 5, None)
    assert meter_of(json.loads(ACP_OPENCODE)) == Usage(10, 5, None)
    assert meter_of(json.loads(ACP_GEMINI)) == Usage(10, 5, None)
    assert meter_of(json.loads(OPENCODE_SERVE)) == Usage(10, 5, 0.0)
    cached = json.loads(ACP_OPENCODE)
    cached["usage"].update(cachedReadTokens=100, cachedWriteTokens=1, thoughtTokens=3)
    assert read_event(cached) == Usage(111, 8, None)
    text = json.loads(OPENCODE_SERVE)
    text["properties"]["part"]["type"] = "text"
    assert meter_of(text, {"stopReason": "end_turn"}) is None  # no usage in either


def test_a_codex_app_servers_turn_is_its_share_of_the_threads_running_total() -> None:
    def update(total: tuple[int, int], last: tuple[int, int]) -> dict[str, object]:
        event = json.loads(CODEX_APP)
        usage = event["params"]["tokenUsage"]
        usage["total"].update(inputTokens=total[0], outputTokens=total[1])
        usage["last"].update(inputTokens=last[0], outputTokens=last[1])
        return event

    # A later turn of the thread: two model calls, the second update repeated (rate limits).
    second = meter_of(update((30, 8), (20, 3)), update((45, 10), (15, 2)),
                      update((45, 10), (15, 2)))  # fmt: skip
    assert second == Usage(35, 5, None)
