"""A PostgreSQL DSN's password taken out of text meant for a person (an error, a log line).

libpq quotes a malformed DSN, or the part of it it choked on, in its errors; a message about a store
must never carry its password to a terminal, a log or an HTTP client. ``location.redacted`` names a
store without it; ``scrub`` cleans any text that may quote one.
"""

from __future__ import annotations

from agentmaild.store.location import DSN_SCHEMES, redacted


def scrub(text: str, target: str) -> str:
    """``text`` without the secrets of the DSN ``target``: the DSN itself shown redacted, and its
    password, as written or percent-decoded, wherever it appears as ``***``. A path (a SQLite
    store's target) is no secret: the text is returned as it is."""
    if not target.startswith(DSN_SCHEMES):
        return text
    text = text.replace(target, redacted(target))
    found = _passwords(target)
    for secret in sorted(found, key=len, reverse=True):
        # A reading inside a longer one ("p" of "p@ss") went with it; alone it would mangle text.
        if not any(secret != other and secret in other for other in found):
            text = text.replace(secret, "***")
    return text


def _passwords(dsn: str) -> set[str]:
    """Every reading of the DSN's password: libpq ends the user info at the first ``@`` or ``/``,
    ``urllib`` at the last ``@`` before the path; and a ``password=`` query parameter."""
    from urllib.parse import unquote

    rest = dsn.split("://", 1)[1]
    head, _, query = rest.partition("?")
    ends = [i for i in (rest.find("@"), rest.find("/")) if i >= 0]
    libpq = rest[: min(ends)] if ends and rest[min(ends)] == "@" else ""
    python = head.split("/", 1)[0].rpartition("@")[0]
    found = {info.partition(":")[2] for info in (libpq, python)}
    for param in query.split("&"):
        key, _, value = param.partition("=")
        if unquote(key).strip() == "password":
            found.add(value)
    return {form for secret in found for form in (secret, unquote(secret)) if form}
