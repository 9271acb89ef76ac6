"""The root command's lazy group: a command's module is imported only when that command runs
(or when ``--help`` lists them all), so a cold ``agentmaild inbox`` loads typer and ``cli.read``,
not every command family.

Still one grammar: each module's ``register(app)`` declares its commands on a typer app exactly
as before, and typer turns that app into click commands; this group only delays the import.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import typer
from typer.core import TyperGroup, TyperOption
from typer.main import get_command_name, get_group

# command (or group) name → the module under agentmaild.cli whose ``register(app)`` declares it,
# in the order ``--help`` lists them (commands first, then groups). One line per command.
COMMANDS: dict[str, str] = {
    "send": "sending",
    "reply": "sending",
    "ask": "ask",
    "interrupt": "interrupting",
    "inbox": "read",
    "read": "read",
    "ack": "read",
    "check": "read",
    "list": "read",
    "thread": "read",
    "purge": "read",
    "serve": "daemon",
    "status": "daemon",
    "ctl": "daemon",
    "retry": "daemon",
    "dashboard": "dashboard",
    "demo": "demo",
    "deliveries": "deliveries",
    "logs": "logs",
    "hook": "hooks",
    "relay": "relay",
    "mcp": "mcp",
    "wait": "wait",
    "agents": "agents",
    "limits": "sending",
    "service": "service",
    "store": "store",
    "hooks": "hooks",
    "tokens": "tokens",
    "keys": "trust",
    "peers": "trust",
}


class _LazyCommands(MutableMapping[str, Any]):
    """The group's ``commands``: every name in ``COMMANDS`` (for listing and "did you mean"),
    a value built on first access by importing its module."""

    def __init__(self, given: Mapping[str, Any]) -> None:
        self._loaded: dict[str, Any] = dict(given)

    def _load(self, name: str) -> None:
        """Import ``name``'s module and turn only ``name`` into a click command (typer reads
        each command's signature when it does: a module's other commands wait their turn)."""
        module = importlib.import_module(f"agentmaild.cli.{COMMANDS[name]}")
        staging = typer.Typer()
        module.register(staging)
        staging.registered_commands = [
            c for c in staging.registered_commands
            if (c.name or get_command_name(c.callback.__name__ if c.callback else "")) == name
        ]  # fmt: skip
        staging.registered_groups = [g for g in staging.registered_groups if g.name == name]
        for got, cmd in get_group(staging).commands.items():
            self._loaded.setdefault(got, cmd)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded and name in COMMANDS:
            self._load(name)
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (n for n in self._loaded if n not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(1 for n in self._loaded if n not in COMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._loaded


_typer_display_type = TyperOption.display_type_rich


def _display_type(self: TyperOption, ctx: Any) -> str | None:
    """A flag takes no value, so ``--help`` shows no type for it (typer shows ``<bool>``)."""
    if self.is_flag and self.metavar is None:
        return None
    return _typer_display_type(self, ctx)


TyperOption.display_type_rich = _display_type  # type: ignore[method-assign]


class LazyGroup(TyperGroup):
    """A typer group whose subcommands are imported on demand (see ``COMMANDS``)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.commands)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """The command, its module imported; from here on it runs with the cyclic garbage
        collector on (``hot.entry`` keeps it off while the CLI loads: long-lived commands such
        as ``serve`` need it, imports do not). What the imports left is frozen first: modules,
        classes and functions live as long as the process, and a first collection walking all
        of them would cost a short command a few milliseconds for nothing."""
        try:
            return super().resolve_command(ctx, args)
        finally:
            gc.freeze()
            gc.enable()
