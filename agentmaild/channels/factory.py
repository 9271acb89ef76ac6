"""make_channel: the one place an agent's ``channel`` setting becomes a Channel instance."""

from __future__ import annotations

from pathlib import Path

from agentmaild.channels.acp import AcpChannel
from agentmaild.channels.base import Channel
from agentmaild.channels.claude import ClaudeSpawnChannel
from agentmaild.channels.codex_app import CodexAppChannel
from agentmaild.channels.opencode_server import OpencodeServerChannel
from agentmaild.channels.spawn import SpawnChannel
from agentmaild.channels.stdin import StdinChannel
from agentmaild.channels.tmux import TmuxChannel
from agentmaild.channels.vendor_spawn import VendorSpawnChannel
from agentmaild.channels.vendors import PRESETS
from agentmaild.config import Config
from agentmaild.errors import AgentUnavailable
from agentmaild.models import Agent, ChannelKind
from agentmaild.procs.journal import ProcJournal
from agentmaild.store.location import StoreLocation

# settings.protocol of a stdin agent -> the channel speaking it (None: Claude stream-json lines)
PROTOCOLS: dict[str, type[AcpChannel | CodexAppChannel | OpencodeServerChannel]] = {
    AcpChannel.protocol: AcpChannel,
    CodexAppChannel.protocol: CodexAppChannel,
    OpencodeServerChannel.protocol: OpencodeServerChannel,
}


def make_channel(
    agent: Agent,
    config: Config,
    store_path: Path | StoreLocation,
    *,
    procs: ProcJournal | None = None,
) -> Channel:
    """The channel that delivers to ``agent``.

    Raises ``ValueError`` for ``pull`` agents (they get no delivery loop) and ``AgentUnavailable``
    for a channel that cannot be built (unknown or misconfigured). ``procs``: the daemon's
    process journal, told of every agent process a spawn or stdin channel starts.
    """
    kind = agent.channel
    if kind == ChannelKind.PULL:
        raise ValueError(f"agent {agent.name!r} uses the pull channel: it has no delivery loop")
    if kind == ChannelKind.SPAWN and agent.preset == "claude":
        return ClaudeSpawnChannel(agent, config, store_path, procs=procs)
    if kind == ChannelKind.SPAWN and agent.preset in PRESETS:
        return VendorSpawnChannel(
            agent, config, store_path, preset=PRESETS[agent.preset], procs=procs
        )
    if agent.preset in PRESETS:
        raise AgentUnavailable(f"preset {agent.preset!r} needs the spawn channel, not {kind!r}")
    if kind == ChannelKind.SPAWN:
        return SpawnChannel(agent, config, store_path, procs=procs)
    if kind == ChannelKind.TMUX:
        return TmuxChannel(agent, config, StoreLocation.of(store_path))
    if kind == ChannelKind.STDIN:
        return _stdin_channel(agent, config, store_path, procs)
    raise AgentUnavailable(f"unknown channel {kind!r}")


def _stdin_channel(
    agent: Agent, config: Config, store_path: Path | StoreLocation, procs: ProcJournal | None
) -> Channel:
    protocol = agent.settings.get("protocol")
    if protocol is None:
        return StdinChannel(agent, config, store_path, procs=procs)
    channel = PROTOCOLS.get(protocol) if isinstance(protocol, str) else None
    if channel is None:
        raise AgentUnavailable(f"unknown settings.protocol {protocol!r}; one of {list(PROTOCOLS)}")
    return channel(agent, config, store_path, procs=procs)
