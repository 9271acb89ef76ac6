"""What a turn cost: the tokens (and, where the CLI says it, the US dollars) its JSON events report.

Each vendor reports usage in its own event, read here once (``UsageMeter.feed``), fed every JSON
event a turn prints (``stream_events.StreamJsonEvents``):

- Claude Code (stream-json): the ``result`` event's ``usage`` (``input_tokens`` plus the two
  cache counts, ``output_tokens``: the turn's) and the CLI's own price: the costs of
  ``model_usage_since_last_result`` (the turn's), else ``total_cost_usd`` (the process's: the
  turn's for a one-turn ``-p`` process, the session's so far for a long-lived one).
- Codex (``exec --json``): ``turn.completed``'s ``usage`` (``input_tokens``, which include
  ``cached_input_tokens``, and ``output_tokens``); no price.
- Gemini CLI (``--output-format stream-json``): the ``result`` event's ``stats``
  (``input_tokens``, ``output_tokens``); no price.
- OpenCode (``run --format json``): each ``step_finish`` part's ``tokens`` (``input``, ``output``,
  ``reasoning``, ``cache.read``/``cache.write``) and ``cost`` (OpenCode's price from its model
  list; 0 for a model it has no price for), summed over the turn's steps. ``opencode serve``
  sends the same part in its ``message.part.updated`` event (type ``step-finish``).
- Codex app-server: ``thread/tokenUsage/updated`` (``tokenUsage.total``, the thread's so far,
  and ``.last``, the latest model call's); the turn's is the last total less the total before
  the turn's first call. No price.
- ACP (``session/prompt``'s response): the standard ``usage`` (``inputTokens``, the cache
  counts, ``outputTokens``, ``thoughtTokens``: ``opencode acp``), else Gemini CLI's
  ``_meta.quota.token_count``. No price (OpenCode's ``usage_update`` cost is the session's).

A turn that reported nothing has no usage (None), never zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """One turn's usage: tokens in (prompt, cached included) and out; cost when reported."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "cost_usd": self.cost_usd}  # fmt: skip


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _money(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _claude_cost(event: dict[str, Any]) -> float | None:
    """This turn's price: ``total_cost_usd`` is the whole process's (a long-lived agent's grows
    turn by turn), so the per-model costs since the last result come first when present."""
    since = event.get("model_usage_since_last_result")
    if isinstance(since, dict) and since:
        costs = [_money(_dict(m).get("costUSD")) for m in since.values()]
        if all(c is not None for c in costs):
            return sum(c for c in costs if c is not None)
    return _money(event.get("total_cost_usd"))


def read_event(event: dict[str, Any]) -> Usage | None:
    """The usage one event reports, or None when it reports none (most events)."""
    kind = event.get("type")
    if kind == "result" and isinstance(event.get("usage"), dict):  # Claude Code
        u = event["usage"]
        tokens_in = (_int(u.get("input_tokens")) + _int(u.get("cache_creation_input_tokens"))
                     + _int(u.get("cache_read_input_tokens")))  # fmt: skip
        return Usage(tokens_in, _int(u.get("output_tokens")), _claude_cost(event))
    if kind == "result" and isinstance(event.get("stats"), dict):  # Gemini CLI
        s = event["stats"]
        return Usage(_int(s.get("input_tokens")), _int(s.get("output_tokens")))
    if kind == "turn.completed" and isinstance(event.get("usage"), dict):  # Codex
        u = event["usage"]
        return Usage(_int(u.get("input_tokens")), _int(u.get("output_tokens")))
    if "stopReason" in event:  # an ACP prompt's response
        return _acp(event)
    if kind in ("step_finish", "message.part.updated"):  # OpenCode (run --json; serve's SSE)
        part = _dict(event.get("part") or _dict(event.get("properties")).get("part"))
        if kind != "step_finish" and part.get("type") != "step-finish":
            return None
        tokens = _dict(part.get("tokens"))
        if not tokens and "cost" not in part:
            return None
        cache = _dict(tokens.get("cache"))
        tokens_in = _int(tokens.get("input")) + _int(cache.get("read")) + _int(cache.get("write"))
        tokens_out = _int(tokens.get("output")) + _int(tokens.get("reasoning"))
        return Usage(tokens_in, tokens_out, _money(part.get("cost")))
    return None


def _acp(result: dict[str, Any]) -> Usage | None:
    u = result.get("usage")
    if isinstance(u, dict):  # ACP's own field (opencode acp)
        tokens_in = (_int(u.get("inputTokens")) + _int(u.get("cachedReadTokens"))
                     + _int(u.get("cachedWriteTokens")))  # fmt: skip
        return Usage(tokens_in, _int(u.get("outputTokens")) + _int(u.get("thoughtTokens")))
    count = _dict(_dict(_dict(result.get("_meta")).get("quota")).get("token_count"))
    if not count:  # Gemini CLI's
        return None
    return Usage(_int(count.get("input_tokens")), _int(count.get("output_tokens")))


def _codex_running(event: dict[str, Any]) -> tuple[Usage, Usage] | None:
    """A Codex app-server ``thread/tokenUsage/updated``: (the thread's total, the last call's)."""
    if event.get("method") != "thread/tokenUsage/updated":
        return None
    usage = _dict(_dict(event.get("params")).get("tokenUsage"))
    total, last = _dict(usage.get("total")), _dict(usage.get("last"))
    return (Usage(_int(total.get("inputTokens")), _int(total.get("outputTokens"))),
            Usage(_int(last.get("inputTokens")), _int(last.get("outputTokens"))))  # fmt: skip


class UsageMeter:
    """Sums the usage of one turn's events; ``total()`` is None when none reported any."""

    __slots__ = ("_before", "_total")

    def __init__(self) -> None:
        self._total: Usage | None = None
        self._before: Usage | None = None  # Codex app-server: the thread's total before the turn

    def feed(self, event: dict[str, Any]) -> None:
        running = _codex_running(event)
        if running is not None:  # a running total (repeated when rate limits change): a delta
            total, last = running
            if self._before is None:
                self._before = Usage(total.tokens_in - last.tokens_in,
                                     total.tokens_out - last.tokens_out)  # fmt: skip
            self._total = Usage(total.tokens_in - self._before.tokens_in,
                                total.tokens_out - self._before.tokens_out)  # fmt: skip
            return
        found = read_event(event)
        if found is None:
            return
        have = self._total
        if have is None:
            self._total = found
            return
        cost = found.cost_usd if have.cost_usd is None else have.cost_usd + (found.cost_usd or 0)
        self._total = Usage(have.tokens_in + found.tokens_in, have.tokens_out + found.tokens_out,
                            cost)  # fmt: skip

    def total(self) -> Usage | None:
        return self._total
