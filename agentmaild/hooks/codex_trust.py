"""Saves Codex's trust in the hooks we installed, through Codex's own app-server.

Codex runs a hook from ``hooks.json`` only when ``config.toml`` holds
``[hooks.state."<key>"] trusted_hash`` equal to the hook's current hash (the key holds the file,
the event and the hook's position; the hash is Codex's own). Rather than copy Codex's hashing,
``trust`` asks ``codex app-server`` (JSON-RPC lines on stdio): ``hooks/list`` gives each hook's key,
command and ``currentHash``; ``config/batchWrite`` upserts ``trusted_hash`` for ours only (the
user's own hooks keep whatever trust they had). Without a codex executable the hooks stay
untrusted: run codex with ``--dangerously-bypass-hook-trust``, or trust them in its ``/hooks``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from agentmaild.hooks.install import is_our_command

TIMEOUT_S = 60.0


def trust(codex: str, hooks_file: Path, cwd: Path, exe: str) -> int:
    """Trust our hooks in ``hooks_file``; returns how many needed it. Raises on any failure."""
    proc = subprocess.Popen(
        [codex, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        text=True,
    )
    import threading

    timer = threading.Timer(TIMEOUT_S, proc.kill)
    timer.start()
    try:
        rpc = _Rpc(proc)
        rpc.call("initialize", {"clientInfo": {"name": "agentmaild", "version": "1"}})
        rpc.notify("initialized")
        listed = rpc.call("hooks/list", {"cwds": [str(cwd)]})
        edits = [
            {
                "keyPath": f'hooks.state."{hook["key"]}".trusted_hash',
                "value": hook["currentHash"],
                "mergeStrategy": "upsert",
            }
            for entry in listed.get("data", [])
            for hook in entry.get("hooks", [])
            if _ours(hook, hooks_file, exe) and hook.get("trustStatus") != "trusted"
        ]
        if edits:
            rpc.call("config/batchWrite", {"edits": edits})
        return len(edits)
    finally:
        timer.cancel()
        _end(proc)


def _end(proc: subprocess.Popen[str]) -> None:
    """EOF on its stdin ends the app-server (and the native binary behind npm's node wrapper,
    which a SIGKILL of the wrapper would orphan); a kill only if it lingers."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _ours(hook: dict[str, Any], hooks_file: Path, exe: str) -> bool:
    source = hook.get("sourcePath")
    same_file = isinstance(source, str) and Path(source).resolve() == hooks_file.resolve()
    return same_file and is_our_command(hook.get("command"), exe) and "currentHash" in hook


class _Rpc:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.next_id = 0

    def notify(self, method: str) -> None:
        self._send({"method": method})

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self._send({"id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:  # bounded by the timer in ``trust``, which kills the app-server
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"codex app-server ended before answering {method}")
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"codex app-server: {method}: {msg['error']}")
                result = msg.get("result")
                return result if isinstance(result, dict) else {}

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
