"""The typer command line: parse, call, print, map errors to exit codes — no mail logic here.

Owns: ``app`` (the root command and ``run``), ``common`` (store opening, output, error mapping),
and one module per command family (``read``, ``agents``, ``daemon``, ``service``, ``hooks``);
``status_view`` renders ``status``.
May import: everything below it (``mail``, ``store``, ``control.client``, ``config``, ``hooks``,
``daemon`` lazily for ``serve``). Nothing imports ``cli`` except ``entry``.
Kept import-free: ``agentmaild.cli.app`` loads typer, so the hot paths never touch this package.
"""
