"""The control socket's commands: ``ControlHandler.handle(cmd, args)`` and the metrics page."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentmaild import __version__
from agentmaild.control.protocol import seconds_arg
from agentmaild.errors import NotFound, ValidationError
from agentmaild.ids import check_message_id, check_name
from agentmaild.rules.ask import DAEMON_WAIT_MAX_S, ReplyWaiters
from agentmaild.rules.costs import status_extras
from agentmaild.rules.members import status_row
from agentmaild.rules.report import rules_metrics, rules_status

if TYPE_CHECKING:
    from agentmaild.config import Config
    from agentmaild.store.aio import AsyncMailStore


class SupervisorPort(Protocol):
    """The delivery supervisor as the control commands see it."""

    def snapshot(self) -> dict[str, dict[str, Any]]: ...
    def wake(self, agents: Iterable[str] | None = None) -> list[str]: ...
    def retry(self, agents: Iterable[str]) -> list[str]: ...
    def pause(self, agent: str | None = None) -> list[str]: ...
    def resume(self, agent: str | None = None) -> list[str]: ...
    async def drain(self, timeout_s: float) -> dict[str, Any]: ...
    async def interrupt(
        self, agent: str, *, message_id: str | None, by: str, reason: str | None
    ) -> dict[str, Any]: ...


class DaemonPort(Protocol):
    """What the control commands need of the running daemon: the handler never imports it."""

    @property
    def started(self) -> float: ...
    @property
    def started_at(self) -> str: ...
    @property
    def db(self) -> Path: ...
    @property
    def socket(self) -> Path: ...
    @property
    def config(self) -> Config: ...
    @property
    def store(self) -> AsyncMailStore: ...
    @property
    def supervisor(self) -> SupervisorPort: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def waiters(self) -> ReplyWaiters: ...
    def woken(self, agents: list[str] | None) -> list[str]: ...
    def request_shutdown(self) -> None: ...
    async def reload(self) -> dict[str, Any]: ...


def _opt_str(args: dict[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is not None and not isinstance(value, str):
        raise ValidationError(f"{key}: expected a string, got {type(value).__name__}")
    return value


class ControlHandler:
    """``handle(cmd, args)`` for ControlServer; errors are AgentmaildError subclasses."""

    def __init__(self, daemon: DaemonPort) -> None:
        self._d = daemon

    async def handle(self, cmd: str, args: dict[str, Any]) -> dict[str, Any]:
        method = getattr(self, f"_cmd_{cmd}", None)
        if method is None:
            raise ValidationError(f"command {cmd!r} is not implemented")
        result: dict[str, Any] = await method(args)
        return result

    def _info(self) -> dict[str, Any]:
        d = self._d
        return {
            "pid": os.getpid(),
            "version": __version__,
            "uptime_s": round(time.monotonic() - d.started, 3),
            "started_at": d.started_at,
            "db": str(d.db),
            "socket": str(d.socket),
            "config": str(d.config.source) if d.config.source else None,
            "stopping": d.stopping,
            # the bound HTTP face (a port 0 in the config is the kernel's pick): `dashboard`
            "http": getattr(d, "http_address", None),
            # the outages the daemon lived through, when its store keeps them (store.services)
            "outages": outages.snapshot() if (outages := getattr(d, "outages", None)) else None,
        }

    async def _cmd_ping(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"pong": True, **self._info()}

    async def _cmd_status(self, args: dict[str, Any]) -> dict[str, Any]:
        d = self._d
        agents = await d.store.list_agents()
        counts = await d.store.counts()
        totals = await d.store.totals()
        loops = d.supervisor.snapshot()
        rows = [status_row(a, counts.get(a.name), loops.get(a.name)) for a in agents]
        rules = await d.store.run_sync(rules_status, d.store.sync)
        reply = {"daemon": self._info(), "agents": rows, "totals": totals, "rules": rules}
        if args.get("costs") is True:  # `agentmaild status`: then it need not open the store
            reply.update(await d.store.run_sync(status_extras, d.store.sync, time.time()))
        return reply

    async def _cmd_agents(self, args: dict[str, Any]) -> dict[str, Any]:
        loops = self._d.supervisor.snapshot()
        return {
            "agents": [
                {"name": n, "channel": r["channel"], "state": r["state"]} for n, r in loops.items()
            ]
        }

    async def _cmd_wake(self, args: dict[str, Any]) -> dict[str, Any]:
        names = args.get("agents")
        if names is not None and (
            not isinstance(names, list) or not all(isinstance(n, str) for n in names)
        ):
            raise ValidationError("agents: expected a list of agent names")
        return {"woken": self._d.woken(names)}

    async def _cmd_await_reply(self, args: dict[str, Any]) -> dict[str, Any]:
        """Hold the request until the question's first reply is in (``ask``), or the timeout."""
        thread = check_message_id(str(_opt_str(args, "thread")))
        asker = check_name(str(_opt_str(args, "agent")), "agent")
        timeout = seconds_arg(args, "timeout_s", DAEMON_WAIT_MAX_S)
        found = await self._d.waiters.wait(
            self._d.store, thread, asker, min(timeout, DAEMON_WAIT_MAX_S),
            self._d.config.daemon.poll_interval_s,
        )  # fmt: skip
        return {"message_id": found.id if found is not None else None}

    async def _cmd_interrupt(self, args: dict[str, Any]) -> dict[str, Any]:
        """Stop an agent's running turn; the caller checked who may (``rules.interrupts``)."""
        agent = check_name(str(_opt_str(args, "agent")), "agent")
        mail = _opt_str(args, "message_id")
        message_id = check_message_id(mail) if mail is not None else None
        by = check_name(str(_opt_str(args, "by")), "by")
        return await self._d.supervisor.interrupt(
            agent, message_id=message_id, by=by, reason=_opt_str(args, "reason")
        )

    async def _cmd_pause(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"paused": self._d.supervisor.pause(_opt_str(args, "agent"))}

    async def _cmd_resume(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"resumed": self._d.supervisor.resume(_opt_str(args, "agent"))}

    async def _cmd_retry(self, args: dict[str, Any]) -> dict[str, Any]:
        agent, delivery = _opt_str(args, "agent"), _opt_str(args, "delivery")
        owners = {d.delivery_id: d.agent for d in await self._d.store.dead_letters(agent)}
        ids = await self._d.store.retry_dead(agent=agent, delivery_id=delivery)
        if delivery is not None and not ids:
            raise NotFound(f"no dead delivery {delivery}")
        # A retried batch starts afresh: its loop drops the backoff of earlier failures.
        retried = self._d.supervisor.retry(sorted({owners[i] for i in ids if i in owners}))
        return {"requeued": ids, "retried_agents": retried}

    async def _cmd_drain(self, args: dict[str, Any]) -> dict[str, Any]:
        timeout = seconds_arg(args, "timeout_s", self._d.config.daemon.shutdown_grace_s)
        return await self._d.supervisor.drain(timeout)

    async def _cmd_reload(self, args: dict[str, Any]) -> dict[str, Any]:
        return await self._d.reload()

    async def _cmd_shutdown(self, args: dict[str, Any]) -> dict[str, Any]:
        self._d.request_shutdown()
        return {"stopping": True, "pid": os.getpid()}

    async def _cmd_metrics(self, args: dict[str, Any]) -> dict[str, Any]:
        counts = await self._d.store.counts()
        loops = self._d.supervisor.snapshot()
        text = render_metrics(time.monotonic() - self._d.started, counts, loops)
        rules = await self._d.store.run_sync(rules_status, self._d.store.sync)
        text += "".join(line + "\n" for line in rules_metrics(rules))
        return {"content_type": "text/plain; version=0.0.4", "text": text}


_METRICS = (
    ("unread_messages", "gauge", "Unread messages addressed to the agent.", "unread"),
    ("in_flight_deliveries", "gauge", "Batches claimed and not yet settled.", "in_flight"),
    ("dead_letters", "gauge", "Dead-letter batches waiting for a retry.", "dead_letters"),
    ("delivered_total", "counter", "Batches delivered and acked since start.", "delivered_total"),
    ("failed_total", "counter", "Failed delivery attempts since start.", "failed_total"),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(
    uptime_s: float, counts: dict[str, Any], loops: dict[str, dict[str, Any]]
) -> str:
    """Prometheus text exposition format, version 0.0.4."""
    lines = [
        "# HELP agentmaild_uptime_seconds Seconds since the daemon started.",
        "# TYPE agentmaild_uptime_seconds gauge",
        f"agentmaild_uptime_seconds {uptime_s:.3f}",
    ]
    names = sorted(set(counts) | set(loops))
    for metric, kind, help_text, key in _METRICS:
        lines += [f"# HELP agentmaild_{metric} {help_text}", f"# TYPE agentmaild_{metric} {kind}"]
        for name in names:
            c = counts.get(name)
            value = getattr(c, key, 0) if c is not None and hasattr(c, key) else 0
            value = loops.get(name, {}).get(key, value)
            lines.append(f'agentmaild_{metric}{{agent="{_label(name)}"}} {value}')
    return "\n".join(lines) + "\n"
