"""The scripted agent of ``agentmaild demo``: no model, a few lines of Python (stdlib only).

``agentmaild demo`` copies this file into its temporary directory and registers it, once per role,
as a spawn-channel agent: ``python agent.py ROLE``. The daemon starts it for each batch of mail,
with the batch as one stream-json line on stdin and ``AGENTMAIL_AGENT``/``AGENTMAIL_DB`` in its
environment; it answers each message it has a rule for with ``agentmaild send`` and exits 0, and
only then does the daemon ack the batch.

The chain per task: operator → planner ``task N`` → coder ``build N`` → reviewer ``review N`` →
planner ``approved N`` (the planner takes that as the end of the task).
"""

import json
import re
import subprocess
import sys
import time

# role: the first word of a subject it acts on → (whom it mails, the word its subject starts with)
RULES = {
    "planner": {"task": ("coder", "build")},
    "coder": {"build": ("reviewer", "review")},
    "reviewer": {"review": ("planner", "approved")},
}
WORK_S = 0.4  # "working": long enough for the dashboard to show the agent busy


def subjects(text: str) -> list[str]:
    """The subjects of a batch's messages (each rendered as ``subject: "…"``, JSON-quoted)."""
    return [json.loads(quoted) for quoted in re.findall(r'^subject: (".*")$', text, re.M)]


def main() -> int:
    role = sys.argv[1]
    event = json.loads(sys.stdin.readline() or "{}")
    text = event.get("message", {}).get("content", [{}])[0].get("text", "")
    for subject in subjects(text):
        word, _, rest = subject.partition(" ")
        if word not in RULES[role]:
            continue
        to, answer = RULES[role][word]
        time.sleep(WORK_S)
        body = f"{role} handled {subject!r}; over to {to}."
        argv = [sys.executable, "-m", "agentmaild", "send", "--to", to,
                "--subject", f"{answer} {rest}", "--body", body]  # fmt: skip
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
