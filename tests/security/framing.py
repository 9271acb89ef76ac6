"""Reading a delivered batch the way an agent is told to: by its key (issue 33, item 7).

The batch's key line names the key; each body runs from ``<<<body KEY`` to ``>>>body KEY``;
every other line is framing. ``Frame`` is that reading, strict: a second key line, a body left
open or a delimiter with another key fails the test that asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEY_LINE = re.compile(r"\[agentmail\] key ([0-9a-f]{16}): ")
MESSAGE_LINE = re.compile(r"^--- message \d+/\d+: (msg-[a-z0-9]+) ---$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    key: str
    framing: list[str]  # the lines outside the bodies, in order
    bodies: list[str]  # each body as shown, in order

    @classmethod
    def read(cls, text: str) -> Frame:
        lines = text.split("\n")
        keys = [m.group(1) for line in lines if (m := KEY_LINE.match(line))]
        assert len(keys) == 1, f"one key line expected: {keys}\n{text}"
        key = keys[0]
        framing: list[str] = []
        bodies: list[str] = []
        body: list[str] | None = None
        for line in lines:
            if body is None and line == f"<<<body {key}":
                body = []
            elif body is not None and line == f">>>body {key}":
                bodies.append("\n".join(body))
                body = None
            elif body is not None:
                body.append(line)
            else:
                framing.append(line)
        assert body is None, f"a body was left open:\n{text}"
        opens, closes = lines.count(f"<<<body {key}"), lines.count(f">>>body {key}")
        assert opens == closes == len(bodies), f"a delimiter inside a body:\n{text}"
        return cls(key=key, framing=framing, bodies=bodies)

    def starting(self, prefix: str) -> list[str]:
        """The framing lines that start with ``prefix``."""
        return [line for line in self.framing if line.startswith(prefix)]

    def message_ids(self) -> list[str]:
        return [m.group(1) for line in self.framing if (m := MESSAGE_LINE.match(line))]


def quoted(lines: list[str], *, keep: frozenset[int] = frozenset()) -> str:
    """The body ``lines`` as shown: each behind ``[quoted] `` but those at the ``keep`` indexes."""
    return "\n".join(line if i in keep else "[quoted] " + line for i, line in enumerate(lines))
