"""Channels: how a batch of mail reaches an agent's session (tmux, spawn, stdin; pull has none)."""
