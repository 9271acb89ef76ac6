"""The reading commands' HTTP side (``--url`` / ``$AGENTMAIL_URL``): call the API and print what
the local command prints, from the API's answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentmaild.cli import mailview
from agentmaild.cli.plain import echo_text, out

Api = tuple[str, str | None]


def api_call(
    api: Api,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    query: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    from agentmaild.http.client import call

    return call(api, method, path, body, query)


def api_rows(
    api: Api, method: str, path: str, query: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = api_call(api, method, path, query=query)["messages"]
    return rows


def print_rows(
    head: dict[str, Any], rows: list[dict[str, Any]], as_json: bool, empty: str
) -> None:
    """Probe rows from the API printed as the local command prints its own."""
    text = "\n".join(mailview.summary_line(r, int(r.get("body_length", 0))) for r in rows)
    out({**head, "messages": mailview.without_length(rows)}, as_json,
        lambda: echo_text(text or empty))  # fmt: skip


def check_remote(api: Api, name: str, inject: bool, as_json: bool) -> None:
    data = api_call(api, "POST", "/v1/inbox/take", {"agent": name, "inject": inject})
    if inject:
        out(data, as_json, lambda: echo_text(str(data["text"]), nl=False))
        return
    out(data, as_json,
        lambda: echo_text(mailview.messages_text(data["messages"]) or f"no unread mail for {name}"))


def thread_remote(api: Api, message_id: str) -> list[dict[str, Any]]:
    from agentmaild.errors import NotFound

    try:
        answer = api_call(api, "GET", f"/v1/threads/{message_id}")
    except NotFound:
        return []  # reported below exactly as the local command reports it
    messages: list[dict[str, Any]] = answer["messages"]
    return messages
