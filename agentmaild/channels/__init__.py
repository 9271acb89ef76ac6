"""Channels: how a batch of mail reaches an agent's session (tmux, spawn, stdin; pull has none).

Owns: ``base`` (the ``Channel`` ABC: ``is_busy``, ``deliver``, ``aclose``), ``factory`` (a
channel for an agent), ``commands`` (an agent command's argv, environment, stream-json line and
pre-fork checks), ``spawn`` (one process per batch), ``stdin`` + ``stdin_host`` + ``stdin_turns``
(one long-lived process: the Channel API, the process host, the turn tracking), ``claude`` (the
Claude Code preset: argv, sessions, environment), ``vendors`` + ``vendor_spawn`` (the Codex,
Gemini CLI and OpenCode presets and their spawn channel), ``tmux*`` (pasting into a pane and
reading its screen), ``midturn`` (mail handed to a running turn by the channel itself: Codex's
``turn/steer``), ``testing`` (FakeChannel).
May import: ``procs``, ``models``, ``errors``, ``config``, ``render``, ``store`` (to save a
session id). Never imports ``delivery``, ``daemon``, ``control`` or ``cli``.
"""
