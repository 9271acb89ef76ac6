"""An agent command's launch, shared by the spawn and stdin channels (and the Claude preset).

Owns the argv placeholders (``render_argv``), the child's environment (``child_env``), the
stream-json user line that carries a batch (``user_line``) and the checks made before a fork
(``check_executable``, ``stall_timeout``): each fails with ``AgentUnavailable`` naming the cause.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from agentmaild.errors import AgentUnavailable
from agentmaild.models import Agent
from agentmaild.store.location import StoreLocation

_PLACEHOLDER = re.compile(r"\{(agent|session_id|delivery_id)\}")


def render_argv(template: tuple[str, ...], values: Mapping[str, str]) -> list[str]:
    """Substitute ``{agent}``, ``{session_id}``, ``{delivery_id}`` in each element, one pass.

    Other braces are left alone and substituted values are never re-scanned; no shell is involved.
    """
    return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], part) for part in template]


def store_of(store: Path | StoreLocation) -> StoreLocation:
    """The store a channel serves, as a location; a store file given by a relative path is made
    absolute (the child may run in another directory)."""
    return StoreLocation.of(store.absolute() if isinstance(store, Path) else store)


def child_env(
    base: Mapping[str, str], *, agent: str, db: StoreLocation, delivery_id: str
) -> dict[str, str]:
    """The inherited environment without Claude Code's own markers, plus the AGENTMAIL_* trio.

    Dropping ``CLAUDECODE``/``CLAUDE_CODE_*`` keeps a daemon started from inside a Claude session
    from making the child believe it is nested; AGENTMAIL_DELIVERY lets our hooks inside the turn
    skip the mail this very turn carries.
    """
    env = {k: v for k, v in base.items() if k != "CLAUDECODE" and not k.startswith("CLAUDE_CODE_")}
    env.update(AGENTMAIL_AGENT=agent, AGENTMAIL_DB=db.target, AGENTMAIL_DELIVERY=delivery_id)
    return env


def user_line(text: str, delivery_id: str) -> bytes:
    """The stream-json user message that carries one batch; its uuid is the delivery id."""
    message = {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": None,
        "uuid": delivery_id,
    }
    return json.dumps(message, ensure_ascii=False).encode() + b"\n"


def check_executable(executable: str, cwd: str | None, env: Mapping[str, str]) -> None:
    """A clear AgentUnavailable before the fork, for the common cases; races still map later."""
    if os.sep in executable:
        path = Path(cwd or ".", executable) if not os.path.isabs(executable) else Path(executable)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise AgentUnavailable(f"executable {executable!r} not found or not executable")
    elif shutil.which(executable, path=env.get("PATH", os.defpath)) is None:
        raise AgentUnavailable(f"executable {executable!r} not found on PATH")


def stall_timeout(agent: Agent, default: float) -> float:
    value = agent.settings.get("stall_timeout_s", default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise AgentUnavailable(f"settings.stall_timeout_s must be a positive number, got {value!r}")
    return float(value)
