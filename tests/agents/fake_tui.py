#!/usr/bin/env python3
"""Stand-in for Claude Code's interactive TUI, run in a tmux pane (stdlib only).

Screen, like Claude Code 2.x: transcript, a spinner line while busy, a rule, the composer (the
prompt glyph U+276F + NO-BREAK SPACE + typed text, continuation lines indented), a rule, and a
footer that gains ``· esc to interrupt`` while a turn runs. A dialog replaces the composer.

Input: bracketed paste (ESC[200~ … ESC[201~, CR/LF kept as newlines) and typed keys go into the
composer; Enter submits a non-empty composer when idle: the UserPromptSubmit hooks from
``.claude/settings.json`` and ``.claude/settings.local.json`` in the cwd run first (JSON on
stdin, like Claude; exit 2 blocks the prompt), the prompt goes to the record file, the turn
stays busy for ``FAKE_TUI_BUSY_S`` (and while ``<control>/hold`` exists), then the Stop hooks
run. Escape twice clears the composer ("esc again to clear"); Escape during a turn interrupts it
(no Stop hook, as in Claude); C-u deletes the last line; C-c clears.

Environment:
  FAKE_TUI_RECORD     JSONL file, one {"prompt", "session_id", "at"} per submitted prompt
  FAKE_TUI_INPUT_LOG  JSONL file, one {"kind", "data", "state"} per input event (paste/key)
  FAKE_TUI_CONTROL    directory of control files: ``hold`` (keep the turn busy), ``dialog``
                      (show a dialog; Escape closes it and deletes the file), ``ignore-enter``
  FAKE_TUI_BUSY_S     seconds each turn stays busy (default 0.3)
  FAKE_TUI_HOOKS      0 to run no hooks (default 1)
  FAKE_TUI_SESSION_FILE  1 to keep $HOME/.claude/sessions/<pid>.json up to date (status)
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import termios
import time
import tty
import uuid
from pathlib import Path

GLYPH = "\u276f"
NBSP = "\u00a0"
RULE = "\u2500"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


class FakeTui:
    def __init__(self) -> None:
        self.cwd = Path.cwd()
        self.session_id = str(uuid.uuid4())
        self.record = _env_path("FAKE_TUI_RECORD")
        self.input_log = _env_path("FAKE_TUI_INPUT_LOG")
        self.control = _env_path("FAKE_TUI_CONTROL")
        self.busy_s = float(os.environ.get("FAKE_TUI_BUSY_S", "0.3"))
        self.run_hooks = os.environ.get("FAKE_TUI_HOOKS", "1") != "0"
        self.session_file = os.environ.get("FAKE_TUI_SESSION_FILE") == "1"
        self.transcript: list[str] = []
        self.composer = ""
        self.busy_until: float | None = None
        self.esc_armed = False
        self.pending = ""  # undecoded input
        self.in_paste = False
        self.paste = ""
        self.dirty = True

    # -- control files ----------------------------------------------------------------------
    def flag(self, name: str) -> bool:
        return self.control is not None and (self.control / name).exists()

    @property
    def dialog(self) -> bool:
        return self.flag("dialog")

    @property
    def busy(self) -> bool:
        return self.busy_until is not None

    def state(self) -> str:
        return "dialog" if self.dialog else "busy" if self.busy else "idle"

    # -- hooks ------------------------------------------------------------------------------
    def hook_commands(self, event: str) -> list[str]:
        commands: list[str] = []
        for name in ("settings.json", "settings.local.json"):
            try:
                settings = json.loads((self.cwd / ".claude" / name).read_text())
            except (OSError, ValueError):
                continue
            for group in (settings.get("hooks") or {}).get(event) or []:
                commands += [h["command"] for h in group.get("hooks", []) if h.get("command")]
        return commands

    def hook(self, event: str, **extra: object) -> int:
        if not self.run_hooks:
            return 0
        payload = {
            "session_id": self.session_id,
            "transcript_path": str(self.cwd / f".fake-tui-{self.session_id}.jsonl"),
            "cwd": str(self.cwd),
            "hook_event_name": event,
            **extra,
        }
        env = dict(os.environ, CLAUDE_PROJECT_DIR=str(self.cwd))
        worst = 0
        for command in self.hook_commands(event):
            done = subprocess.run(
                ["sh", "-c", command], input=json.dumps(payload).encode(), env=env,
                capture_output=True, timeout=30, check=False,
            )
            worst = max(worst, done.returncode)
        return worst

    # -- state changes ----------------------------------------------------------------------
    def write_session(self, status: str) -> None:
        if not self.session_file:
            return
        folder = Path(os.environ["HOME"]) / ".claude" / "sessions"
        folder.mkdir(parents=True, exist_ok=True)
        now = int(time.time() * 1000)
        data = {"pid": os.getpid(), "sessionId": self.session_id, "cwd": str(self.cwd),
                "kind": "interactive", "status": status, "updatedAt": now,
                "statusUpdatedAt": now}
        tmp = folder / f".{os.getpid()}.json"
        tmp.write_text(json.dumps(data))
        tmp.replace(folder / f"{os.getpid()}.json")

    def log_input(self, kind: str, data: str) -> None:
        if self.input_log is not None:
            with self.input_log.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"kind": kind, "data": data, "state": self.state(),
                                    "composer": self.composer, "at": time.time()}) + "\n")

    def submit(self) -> None:
        prompt = self.composer
        if not prompt.strip() or self.busy or self.flag("ignore-enter"):
            return
        self.composer = ""
        self.dirty = True
        self.draw()
        if self.hook("UserPromptSubmit", prompt=prompt) == 2:
            return  # blocked by a hook: Claude drops the prompt
        lines = prompt.split("\n")
        self.transcript += [f"{GLYPH} {lines[0]}", *(f"  {line}" for line in lines[1:]), ""]
        if self.record is not None:
            with self.record.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"prompt": prompt, "session_id": self.session_id,
                                    "at": time.time()}) + "\n")
        self.busy_until = time.monotonic() + self.busy_s
        self.dirty = True
        self.write_session("busy")

    def tick(self) -> None:
        if self.busy_until is None or time.monotonic() < self.busy_until or self.flag("hold"):
            return
        self.busy_until = None
        self.transcript += ["\u25cf ok from fake", ""]
        self.dirty = True
        self.draw()
        self.hook("Stop", stop_hook_active=False, last_assistant_message="ok from fake")
        self.write_session("idle")
        self.dirty = True

    # -- input ------------------------------------------------------------------------------
    def feed(self, data: str) -> None:
        self.pending += data
        while self.pending:
            if self.in_paste:
                end = self.pending.find(PASTE_END)
                if end < 0:
                    self.paste, self.pending = self.paste + self.pending, ""
                    return
                self.paste += self.pending[:end]
                self.pending = self.pending[end + len(PASTE_END):]
                self.in_paste = False
                self.on_paste(self.paste.replace("\r\n", "\n").replace("\r", "\n"))
                self.paste = ""
            elif self.pending.startswith(PASTE_START):
                self.pending = self.pending[len(PASTE_START):]
                self.in_paste = True
            elif self.pending.startswith("\x1b[") or self.pending.startswith("\x1bO"):
                if not self.skip_sequence():
                    return  # incomplete: wait for the rest
            else:
                char, self.pending = self.pending[0], self.pending[1:]
                self.on_key(char)

    def skip_sequence(self) -> bool:
        for i in range(2, len(self.pending)):
            if "\x40" <= self.pending[i] <= "\x7e":
                self.log_input("key", self.pending[: i + 1])
                self.pending = self.pending[i + 1:]
                return True
        return False

    def on_paste(self, text: str) -> None:
        self.log_input("paste", text)
        if not self.dialog:
            self.composer += text
            self.esc_armed = False
            self.dirty = True

    def on_key(self, char: str) -> None:
        self.log_input("key", char)
        self.dirty = True
        if self.dialog:
            if char == "\x1b" and self.control is not None:
                (self.control / "dialog").unlink(missing_ok=True)
            return
        if char == "\x1b":
            self.on_escape()
            return
        if char != "\x1b":
            self.esc_armed = False
        if char == "\r":
            self.submit()
        elif char == "\x15":  # C-u: the last line goes
            self.composer = self.composer.rsplit("\n", 1)[0] if "\n" in self.composer else ""
        elif char == "\x03":
            self.composer = ""
        elif char in ("\x7f", "\x08"):
            self.composer = self.composer[:-1]
        elif char == "\n" or char >= " ":
            self.composer += char

    def on_escape(self) -> None:
        if self.busy:
            self.busy_until = None  # interrupted: no Stop hook, as in Claude
            self.transcript += ["  \u23bf  Interrupted", ""]
            self.write_session("idle")
        elif self.composer and self.esc_armed:
            self.composer, self.esc_armed = "", False
        elif self.composer:
            self.esc_armed = True

    # -- screen -----------------------------------------------------------------------------
    def draw(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        width, height = os.get_terminal_size(sys.stdout.fileno())
        rule = RULE * width
        if self.dialog:
            box = ["\u256d" + RULE * (width - 2) + "\u256e",
                   "\u2502 Do you want to proceed?",
                   f"\u2502 {GLYPH} 1. Yes",
                   "\u2502   2. No",
                   "\u2570" + RULE * (width - 2) + "\u256f",
                   "  Esc to cancel"]
            bottom = box
        else:
            lines = self.composer.split("\n")
            hint = "esc again to clear" if self.esc_armed else ""
            status = "\u273d Working\u2026" if self.busy else ""
            footer = "  ? for shortcuts" + (" \u00b7 esc to interrupt" if self.busy else "")
            bottom = [status, hint.rjust(width - 1), rule, f"{GLYPH}{NBSP}{lines[0]}",
                      *(f"  {line}" for line in lines[1:]), rule, footer]
        top = self.transcript[-max(height - len(bottom), 0):] if height > len(bottom) else []
        screen = top + [""] * (height - len(top) - len(bottom)) + bottom
        out = "\x1b[H\x1b[2J" + "\r\n".join(line[:width] for line in screen[-height:])
        sys.stdout.write(out)
        sys.stdout.flush()


def main() -> int:
    tui = FakeTui()
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    sys.stdout.write("\x1b[?2004h")  # ask for bracketed paste, as Claude does
    tui.write_session("idle")
    tui.hook("SessionStart", source="startup")
    dialog_was = tui.dialog
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.03)
            if ready:
                data = os.read(fd, 65536)
                if not data:
                    return 0
                tui.feed(data.decode("utf-8", "replace"))
            tui.tick()
            if tui.dialog != dialog_was:
                dialog_was, tui.dirty = tui.dialog, True
            tui.draw()
    finally:
        sys.stdout.write("\x1b[?2004l")
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main())
