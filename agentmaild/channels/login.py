"""A failed turn that means "not logged in / no API key", said so a person can act on it.

The one place that knows what each agent CLI prints when it has no credentials, taken from the
pinned CLIs run with no key and an empty ``HOME`` (``tests/e2e/test_login_texts.py`` runs them):

- Claude Code: ``Not logged in · Please run /login`` (its result text, exit 1);
- Codex: ``Missing environment variable: `OPENAI_API_KEY`.`` (a provider whose key variable is
  unset) or ``unexpected status 401 Unauthorized: …`` (the API refused the request);
- Gemini CLI: ``Please set an Auth method in your …/settings.json or specify one of the following
  environment variables …`` or ``When using Gemini API, you must specify the GEMINI_API_KEY
  environment variable.`` or, run by the preset with no auth settings, ``Invalid auth method
  selected.`` (exit 41);
- OpenCode: ``Error: <the provider's refusal>`` (``--format json``: an ``APIError`` event with
  it) — its own words carry no sign, so the provider's refusal is matched (a 401, an invalid or
  missing API key).

The spawn channel keeps the last lines of a turn's output (``OutputTail``), the stdin channel
its turn's result; when the turn fails, ``failed_turn`` turns them into the agent's unavailable
reason, e.g. ``claude: not logged in
(no API key): set ANTHROPIC_API_KEY or run `claude /login```.
"""

from __future__ import annotations

import os
import re
from collections import deque

from agentmaild.errors import AgentUnavailable, DeliveryFailed
from agentmaild.models import Agent
from agentmaild.procs.lines import Line

TAIL_LINES = 40
LINE_MAX = 4000  # a stream-json line holds the words deep inside
SAID_MAX = 120
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PROVIDER_REFUSED = (
    r"\b401\b|unauthori[sz]ed|incorrect api key|invalid (x-)?api[ -]?key|api key (is )?missing"
    r"|didn't provide an api key|authentication[_ ]error"
)
# vendor → (a pattern of its no-credentials output, what to do about it)
SIGNS: dict[str, tuple[re.Pattern[str], str]] = {
    "claude": (
        re.compile(r"Not logged in|Invalid API key|\"error\":\s*\"authentication_failed\""),
        "set ANTHROPIC_API_KEY or run `claude /login`",
    ),
    "codex": (
        re.compile(r"Missing environment variable: `\w+`|status 401 Unauthorized|Not logged in"),
        "set OPENAI_API_KEY (or the variable its provider's env_key names) or run `codex login`",
    ),
    "gemini": (
        re.compile(
            r"Please set an Auth method|you must specify the GEMINI_API_KEY|Invalid auth method"
        ),
        "set GEMINI_API_KEY or run `gemini` once to sign in",
    ),
    "opencode": (
        re.compile(rf"(?:Error:|\"APIError\").*?(?P<said>{_PROVIDER_REFUSED})", re.I),
        "run `opencode auth login` or set the provider's API key variable",
    ),
}


class OutputTail:
    """The last lines a turn wrote on stdout and stderr (bounded)."""

    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)

    def feed(self, line: Line) -> None:
        text = _ANSI.sub("", line.text).strip()
        if text:
            self._lines.append(text[:LINE_MAX])

    def text(self) -> str:
        return "\n".join(self._lines)


def vendor_of(agent: Agent) -> str | None:
    """The agent CLI an agent runs: its preset, else its command's executable when that is one
    of the four."""
    if agent.preset in SIGNS:
        return agent.preset
    if agent.command:
        name = os.path.basename(agent.command[0])
        return name if name in SIGNS else None
    return None


def login_reason(vendor: str | None, output: str) -> str | None:
    """``<vendor>: not logged in (no API key): <fix>`` when ``output`` shows the CLI had no
    credentials, else None. The sign found is quoted: the CLI's own words."""
    if vendor not in SIGNS:
        return None
    pattern, fix = SIGNS[vendor]
    for line in reversed(output.splitlines()):
        found = pattern.search(line)
        if found:
            start = found.start("said") if "said" in found.groupdict() else found.start()
            said = line[start:].split('"', 1)[0].strip()  # a JSON line: up to its quote
            said = said if len(said) <= SAID_MAX else said[: SAID_MAX - 3] + "..."
            return f"{vendor}: not logged in (no API key): {fix} (it said: {said})"
    return None


def failed_turn(agent: Agent, reason: str, output: str) -> DeliveryFailed | AgentUnavailable:
    """What a failed turn raises: the agent unavailable, saying how to log in, when its output
    (a spawned turn's last lines, a long-lived process's result) shows no credentials; else the
    delivery failed for ``reason``."""
    login = login_reason(vendor_of(agent), output)
    return AgentUnavailable(f"{login}; {reason}") if login else DeliveryFailed(reason)
