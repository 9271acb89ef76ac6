"""What the model stand-ins see of our MCP server's tools in a vendor CLI's request: the name under
which a tool is offered, and the tool results the conversation carries back (each CLI has its own
shape)."""

from __future__ import annotations

import json

from tests.support.loopback_api import RecordedRequest


def tool_texts(req: RecordedRequest) -> list[str]:
    """The tool results the request carries (chat: ``tool`` messages; responses:
    ``function_call_output`` items; Gemini: ``functionResponse`` parts)."""
    found = [t for role, t in req.texts if role == "tool"]
    items = req.body.get("input") if isinstance(req.body, dict) else None
    contents = req.body.get("contents") if isinstance(req.body, dict) else None
    found += [json.dumps(part["functionResponse"]) for c in contents or [] if isinstance(c, dict)
              for part in c.get("parts") or [] if "functionResponse" in part]  # fmt: skip
    found += [json.dumps(item.get("output")) for item in (items if isinstance(items, list) else [])
              if isinstance(item, dict) and item.get("type") == "function_call_output"]  # fmt: skip
    return [t for t in found if "remainingTokens" not in t]  # Codex's own warm-up: not ours


def offered(req: RecordedRequest, tool: str) -> str | None:
    """The name under which the CLI offers our server's ``tool`` to the model, if it does
    (Codex: ``NAMESPACE/NAME``, a tool of the namespace ``mcp__agentmail``)."""
    tools = list(req.body.get("tools") or []) if isinstance(req.body, dict) else []
    tools += [d for t in tools for d in t.get("functionDeclarations") or []]  # Gemini's
    for t in tools:
        name = t.get("name") or t.get("function", {}).get("name") or ""
        if t.get("type") == "namespace" and "agentmail" in name:
            if any(inner.get("name") == tool for inner in t.get("tools") or []):
                return f"{name}/{tool}"
        elif "agentmail" in name and name.endswith(tool):
            return str(name)
    return None
