"""The typer command line: parse, call, print, map errors to exit codes — no mail logic here.

Owns: ``app`` (the root command and ``run``), ``common`` (typer's shared options and the
``command`` decorator), ``plain`` (store opening, output, error mapping: no typer), and one module
per command family (``read``, ``agents``, ``daemon``, ``service``, ``hooks``); ``status_view``
renders ``status``. The everyday commands' bodies are typer-free modules of their own
(``reading``, ``sends``, ``daemon_ops``, ``agents_ops``) that their typer declarations call, so a
reader of the command line other than typer can run them (``plain.call``).
May import: everything below it (``mail``, ``store``, ``control.client``, ``config``, ``hooks``,
``daemon`` lazily for ``serve``). Nothing imports ``cli`` except ``entry``.
Kept import-free: ``agentmaild.cli.app`` loads typer; this package's typer-free modules load
without it.
"""
