"""What ``agentmaild hook pre-tool-use`` refuses: a Bash command that polls for mail in a loop
(the poll-loop guard), and a subagent's call of our MCP tools (Claude Code names the subagent,
``agent_id``, in the hook's input; the tools would act as the session's agent).

Run on every Bash call and every call of our MCP tools, so it is stdlib only.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# -- the poll-loop guard -----------------------------------------------------------------------
# A loop keyword, an `agentmaild check|inbox|list` and a `sleep` anywhere in the command, or
# `watch` running agentmaild. Quoted strings handed to something that runs code (`bash -c '…'`,
# `watch "…"`, `ssh host '…'`) are scanned as commands too; other quoted text is data.
_TOKEN_RE = r"""(?xs)(?P<sq>'[^']*'?)
      | (?P<dq>"(?:[^"\\]|\\.)*"?)
      | (?P<esc>\\.)
      | (?P<sep>[;&|()\n`])
      | (?P<space>[ \t\r]+)
      | (?P<comment>(?<![^\s;&|()`])\#[^\n]*)
      | (?P<word>[^\s;&|()`'"\\]+)
      | (?P<other>.)"""
_PREFIX_WORDS = frozenset(
    {
        "do",
        "then",
        "else",
        "elif",
        "if",
        "!",
        "{",
        "}",
        "while",
        "until",
        "time",
        "exec",
        "command",
        "builtin",
        "nohup",
    }
)
_WRAPPERS = frozenset({"timeout", "nice", "env", "stdbuf", "sudo", "xargs", "time", "nohup"})
_CODE_RUNNERS = frozenset(
    {
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "fish",
        "eval",
        "watch",
        "ssh",
        "su",
        "sudo",
        "xargs",
        "timeout",
        "nohup",
        "env",
        "nice",
        "flock",
        "script",
        "parallel",
        "tmux",
        "screen",
    }
)
_READS = frozenset({"check", "inbox", "list"})
_ASSIGN_RE = r"^[A-Za-z_][A-Za-z0-9_]*="
_WRAPPER_ARG_RE = r"^(-.*|[0-9.]+[smhd]?|[A-Za-z_][A-Za-z0-9_]*=.*)$"
_NESTED_RE = r"[\s;&|]"
_GUARD_MAX_CHARS = 65536
_GUARD_MAX_DEPTH = 4


POLL_REASON = "mail is delivered to you; end your turn instead of polling"
MCP_TOOLS = "mcp__agentmail__"  # Claude Code's names of our MCP server's tools (server agentmail)
SUBAGENT_REASON = (
    "agentmail: the team mail tools are refused to subagents: they would send and read as "
    "{agent}, the agent that started you. Hand what should be sent back to it in your answer"
)


def refusal(data: dict[str, Any], agent: str) -> str | None:
    """Why the tool call in a PreToolUse hook's input is refused, or None."""
    tool = data.get("tool_name")
    if isinstance(tool, str) and tool.startswith(MCP_TOOLS) and data.get("agent_id"):
        return SUBAGENT_REASON.format(agent=agent or "your parent agent")
    tool_input = data.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if tool == "Bash" and isinstance(command, str) and is_mail_poll(command):
        return POLL_REASON
    return None


def is_mail_poll(command: str) -> bool:
    """True for a shell command that polls for mail in a loop (``watch agentmaild …`` too)."""
    found: set[str] = set()
    _scan(command[:_GUARD_MAX_CHARS], found, 0)
    return {"loop", "read", "sleep"} <= found or {"watch", "agentmaild"} <= found


def _scan(command: str, found: set[str], depth: int) -> None:
    segments, nested = _lex(command)
    for words in segments:
        _classify(words, found)
    if depth >= _GUARD_MAX_DEPTH:
        return
    for seg, index, text in nested:
        words = segments[seg][:index] if index >= 0 else []
        runner = index < 0 or any(os.path.basename(w) in _CODE_RUNNERS for w in words)
        if runner or (words and re.match(r"^-[a-z]*c$", words[-1])):
            _scan(text, found, depth + 1)


def _lex(command: str) -> tuple[list[list[str]], list[tuple[int, int, str]]]:
    """Simple commands as word lists (quotes removed), and where quoted code-like strings are."""
    segments: list[list[str]] = [[]]
    nested: list[tuple[int, int, str]] = []
    parts: list[str] = []
    for m in re.finditer(_TOKEN_RE, command):
        kind, text = m.lastgroup, m.group()
        if kind in ("sep", "space", "comment"):
            if parts:
                segments[-1].append("".join(parts))
                parts = []
            if kind == "sep" and segments[-1]:
                segments.append([])
            continue
        if kind in ("sq", "dq"):
            # A command substitution inside double quotes runs wherever it stands (index -1).
            runs = kind == "dq" and ("$(" in text or "`" in text)
            text = _unquote(text)
            if re.search(_NESTED_RE, text):
                nested.append((len(segments) - 1, -1 if runs else len(segments[-1]), text))
        elif kind == "esc":
            text = text[1:]
        parts.append(text)
    if parts:
        segments[-1].append("".join(parts))
    return segments, nested


def _unquote(text: str) -> str:
    inner = text[1:-1] if len(text) > 1 and text[-1] == text[0] else text[1:]
    return inner if text[0] == "'" else re.sub(r"\\(.)", r"\1", inner, flags=re.S)


def _classify(words: list[str], found: set[str]) -> None:
    i = 0
    while i < len(words) and (words[i] in _PREFIX_WORDS or re.match(_ASSIGN_RE, words[i])):
        if words[i] in ("while", "until"):
            found.add("loop")
        i += 1
    if i < len(words) and words[i] in ("for", "select"):
        found.add("loop")
        return
    while i < len(words) - 1 and os.path.basename(words[i]) in _WRAPPERS:
        i += 1
        while i < len(words) - 1 and re.match(_WRAPPER_ARG_RE, words[i]):
            i += 1
    head = os.path.basename(words[i]) if i < len(words) else ""
    if head in ("sleep", "watch"):
        found.add(head)
    for j, word in enumerate(words):
        if os.path.basename(word) == "agentmaild":
            found.add("agentmaild")
            if _READS.intersection(words[j + 1 :]):
                found.add("read")
