"""The spawn presets' turns start with ``agentmaild mcp`` available and only its tools allowed:

- claude: ``--mcp-config`` (the server as JSON) and ``--allowedTools mcp__agentmail``, and
  ``--settings`` with the PreToolUse hook that refuses the tools to subagents;
- codex: ``-c mcp_servers.agentmail.*`` overrides (command, args, ``env_vars``: Codex hands a
  server only the variables it names, and the server finds its store through them; and its tools
  approved, as ``codex exec`` refuses a call that needs approval);
- opencode: ``OPENCODE_CONFIG_CONTENT`` (its inline config) naming the server, unless the agent's
  own settings already set it.
- gemini: no flag or variable adds a server to a headless turn; ``hooks install --vendor gemini
  --dir <the agent's cwd>`` registers it in the project's ``.gemini/settings.json``.

The server is this interpreter's ``-m agentmaild.hot.mcp_relay --agent NAME``, relayed to the
daemon's MCP socket (``mcpserver.hosted``), else ``agentmaild mcp`` started cold; the store comes
from the turn's ``AGENTMAIL_DB`` (a DSN never lands on a command line).
"""

from __future__ import annotations

import json
import sys

SERVER = "agentmail"
# What the server needs from the turn's environment (Codex forwards only what it is told).
SERVER_ENV = ("AGENTMAIL_DB", "AGENTMAIL_AGENT", "AGENTMAILD_CONFIG", "XDG_CONFIG_HOME",
              "XDG_STATE_HOME")  # fmt: skip


def server_argv(agent: str) -> list[str]:
    """The relay to the daemon's MCP socket (``hot.mcp_relay``; ``agentmaild mcp`` when no daemon
    listens): a turn's CLI waits for its servers before its first request, and the relay starts
    in a tenth of the time the SDK takes to load."""
    return [sys.executable, "-m", "agentmaild.hot.mcp_relay", "--agent", agent]


def subagent_guard(agent: str) -> dict[str, object]:
    """Claude Code settings with the PreToolUse hook that refuses our tools to subagents (its
    hooks' input names a subagent; the server is never told): ``hooks.guard.refusal``."""
    import shlex

    argv = [sys.executable, "-m", "agentmaild", "hook", "pre-tool-use", "--agent", agent]
    hook = {"type": "command", "command": shlex.join(argv), "timeout": 15}
    return {"hooks": {"PreToolUse": [{"matcher": f"mcp__{SERVER}__.*", "hooks": [hook]}]}}


def claude_flags(agent: str) -> list[str]:
    argv = server_argv(agent)
    config = {"mcpServers": {SERVER: {"type": "stdio", "command": argv[0], "args": argv[1:]}}}
    return ["--mcp-config", json.dumps(config), "--allowedTools", f"mcp__{SERVER}",
            "--settings", json.dumps(subagent_guard(agent))]  # fmt: skip


def codex_flags(agent: str) -> list[str]:
    argv = server_argv(agent)
    key = f"mcp_servers.{SERVER}"
    return ["-c", f"{key}.command={json.dumps(argv[0])}",
            "-c", f"{key}.args={json.dumps(argv[1:])}",
            "-c", f"{key}.env_vars={json.dumps(list(SERVER_ENV))}",
            "-c", f'{key}.default_tools_approval_mode="approve"']  # fmt: skip


def opencode_config(agent: str) -> str:
    return json.dumps({"mcp": {SERVER: {"type": "local", "command": server_argv(agent),
                                        "enabled": True}}})  # fmt: skip
