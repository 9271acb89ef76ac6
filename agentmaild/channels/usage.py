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
  list; 0 for a model it has no price for), summed over the turn's steps.

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
    if kind == "step_finish":  # OpenCode
        part = _dict(event.get("part"))
        tokens = _dict(part.get("tokens"))
        if not tokens and "cost" not in part:
            return None
        cache = _dict(tokens.get("cache"))
        tokens_in = _int(tokens.get("input")) + _int(cache.get("read")) + _int(cache.get("write"))
        tokens_out = _int(tokens.get("output")) + _int(tokens.get("reasoning"))
        return Usage(tokens_in, tokens_out, _money(part.get("cost")))
    return None


class UsageMeter:
    """Sums the usage of one turn's events; ``total()`` is None when none reported any."""

    __slots__ = ("_total",)

    def __init__(self) -> None:
        self._total: Usage | None = None

    def feed(self, event: dict[str, Any]) -> None:
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
