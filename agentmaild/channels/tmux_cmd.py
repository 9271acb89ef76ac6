"""The tmux command runner: one argv call on an agent's tmux server, failures mapped to channel
errors (no server, session or pane: ``AgentUnavailable``; anything else: ``DeliveryFailed``).

Never a shell string: text only ever travels through a command's stdin (``load-buffer -``), so no
part of it can become a key name or an option.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from agentmaild.errors import AgentUnavailable, DeliveryFailed

TMUX_CALL_TIMEOUT_S = 10.0
# What tmux prints when the server, session or pane is not there.
_GONE_MARKERS = (
    "can't find",
    "no server running",
    "error connecting",
    "server exited",
    "lost server",
    "no such file",
    "connection refused",
    "no current target",
    "session not found",
    "pane not found",
)


def tmux_base(socket: str | None) -> list[str]:
    """``tmux -L NAME`` for a server name, ``tmux -S PATH`` for a socket path, else plain tmux."""
    if not socket:
        return ["tmux"]
    return ["tmux", "-S", socket] if "/" in socket else ["tmux", "-L", socket]


def is_gone(stderr: str) -> bool:
    """True when tmux's error says the server, session or pane is not there."""
    err = stderr.lower()
    return any(marker in err for marker in _GONE_MARKERS)


@dataclass(frozen=True, slots=True)
class TmuxCommand:
    """Runs tmux commands about ``target`` on the server ``socket`` (``""``: the default one)."""

    target: str
    socket: str = ""

    @property
    def base(self) -> list[str]:
        return tmux_base(self.socket)

    def where(self) -> str:
        return f"tmux server {self.socket}" if self.socket else "default tmux server"

    async def run(self, *args: str, stdin: bytes | None = None) -> str:
        """tmux's stdout; raises ``AgentUnavailable`` or ``DeliveryFailed``."""
        argv = [*self.base, *args]
        try:
            with anyio.fail_after(TMUX_CALL_TIMEOUT_S):
                done = await anyio.run_process(argv, input=stdin, check=False)
        except OSError as exc:
            raise AgentUnavailable(f"cannot run tmux: {exc.strerror or exc}") from exc
        except TimeoutError as exc:
            raise AgentUnavailable(f"tmux {args[0]} did not answer ({self.where()})") from exc
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()
            if is_gone(err):
                raise AgentUnavailable(f"pane {self.target} not found ({self.where()}): {err}")
            raise DeliveryFailed(f"tmux {args[0]} failed: {err or f'exit {done.returncode}'}")
        return done.stdout.decode("utf-8", "replace")
