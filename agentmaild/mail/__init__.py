"""Sending mail: the rules a send goes through, once, for every front door.

Owns: ``mailer`` (``Mailer``: a send from sender check to insert and wake-up, replies, groups and
queues, the loop guard's inputs), ``payloads`` (the protocol types' payload schemas, checked on
send), ``jsoninput`` (strict JSON from users and agents: what may be stored), ``vocab`` (the
type, priority and state words; stdlib only, the hot paths and the store import it). The rules'
decisions and texts live in ``store.checks`` (what must hold inside the store's transaction) and
``rules/`` (team-scale rules); this package assembles a send from them.
"""
