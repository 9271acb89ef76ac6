"""The team rules on top of the mail layer (docs/guides/team-rules.md), set under ``[limits]``.

``loopguard`` (duplicate collapse, the ping-pong cap and its escalation), ``ask`` (send a question
and wait for the first reply), ``escalate`` (long-unread mail, checked by the daemon), ``members``
(member and execution status, guarded), ``queues`` (anycast work queues), and for every send
``recipients`` (who ``to`` names) and ``content`` (what a message may hold). The stores enforce
what must be atomic; these modules decide what to ask of them. Nothing here is imported by the
hook or ``check --inject`` paths.
"""
