"""Mail as text: what an agent reads and what a person sees.

Owns: ``framing`` (batches under a framing key a body cannot forge, the PRIORITY banner, mail text
for a person: ``visible``, ``json_text``), ``inject`` (taken mail as injected context within an
output cap, for the hooks and ``check --inject``). Stdlib only: the cold paths import both.
"""
