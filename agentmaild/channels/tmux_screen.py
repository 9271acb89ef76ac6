"""What a Claude Code pane shows: the composer and busy footer in ``capture-pane`` text, and text
made safe to paste into it.

The composer is the prompt glyph between two rule lines; a dialog replaces it, so no composer
means "not ready for input". Only the footer below the composer counts as busy: the transcript
above it may quote the same words.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

BUSY_FOOTER = "esc to interrupt"
_RULE = "\u2500"

# Control characters would leave the bracketed paste (ESC[201~) and turn text into keys.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """The text as pasted: line ends as LF, other control characters spelled ``\\xNN``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


@dataclass(frozen=True, slots=True)
class Composer:
    """Claude Code's input box: the prompt glyph between two rule lines."""

    text: str  # what is typed, whitespace (NBSP included) stripped; "" when empty
    transcript: tuple[str, ...]  # the lines above the box
    footer: tuple[str, ...]  # the lines below it

    def transcript_mentions(self, needle: str) -> bool:
        return any(needle in line for line in self.transcript)


def _is_rule(line: str) -> bool:
    return line.strip().startswith(_RULE * 3) and line.count(_RULE) >= 10


def parse_screen(screen: str, glyph: str = "\u276f") -> Composer | None:
    """The lowest composer on the screen, or None (a dialog replaced it, or no TUI runs)."""
    lines = screen.splitlines()
    rules = [i for i, line in enumerate(lines) if _is_rule(line)]
    for top, bottom in reversed(list(itertools.pairwise(rules))):
        first = lines[top + 1].lstrip() if bottom - top >= 2 else ""
        if first.startswith(glyph):
            body = [first[len(glyph) :], *lines[top + 2 : bottom]]
            text = "\n".join(line.strip() for line in body).strip()
            return Composer(text, tuple(lines[:top]), tuple(lines[bottom + 1 :]))
    return None


def busy_footer(composer: Composer) -> bool:
    """Only the footer counts: a transcript may quote the words."""
    return any(BUSY_FOOTER in line for line in composer.footer)


def last_lines(screen: str, n: int) -> list[str]:
    """The last ``n`` non-blank lines of a captured screen: what a dead pane last said."""
    return [line.rstrip() for line in screen.splitlines() if line.strip()][-n:]


def dead_pane(target: str, where: str, status: str, screen: str, n: int = 3) -> str:
    """The reason a dead pane gives ``status`` (the agent unavailable): its exit status and its
    last lines, so a person sees why its program ended (``Not logged in``, ``ENOTFOUND …``)."""
    exited = f", exit status {status.strip()}" if status.strip() else ""
    lines = [terminal_safe(line)[:120] for line in last_lines(screen, n)]
    said = f"; its last lines: {' | '.join(lines)}" if lines else ""
    return f"pane {target} is dead ({where}{exited}){said}"
