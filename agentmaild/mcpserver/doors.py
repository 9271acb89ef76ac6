"""The front doors the MCP tools go through, one per way the CLI reaches mail: the store (the
``Mailer`` under the config's limits, the store's reads, the hook's ``check --inject``,
``rules.ask``, ``rules.team``) or the daemon's HTTP API (``http.client``, as ``--url`` does).

Each door acts as one agent, fixed when the server starts, and answers with the rows the CLI's
``--json`` prints (``Message.to_dict``/``summary``); ``present`` frames the bodies. Sync: the
server runs each call on a worker thread, one at a time.
"""

from __future__ import annotations

import json
from typing import Any

from agentmaild.errors import StoreError, UsageError
from agentmaild.ids import check_message_id
from agentmaild.mail.mailer import IMPLICIT_RECIPIENTS
from agentmaild.store.base import MailStore
from agentmaild.store.files import identity
from agentmaild.store.location import StoreLocation

Rows = list[dict[str, Any]]
_TEAM_TIMEOUT_S = 1.0


def _payload(args: dict[str, Any]) -> str | None:
    value = args.get("payload")
    return None if value is None else json.dumps(value, separators=(",", ":"))


class StoreDoor:
    """Mail through the store, as the CLI's commands with ``--db`` reach it."""

    def __init__(self, location: StoreLocation, agent: str) -> None:
        from agentmaild.hot.access import store_at

        self.location, self.agent = location, agent
        self.store: MailStore = store_at(location)
        self._watch: MailStore | None = None
        self._mark: object = None
        self._opened = identity(location.local_path) if location.is_file else None

    def here(self) -> None:
        """``StoreError`` when the store file this server opened was deleted or replaced since:
        its connection would write to a file nobody reads any more (and a fresh connection, to a
        new empty store at the path)."""
        if self._opened is None:
            return
        now = identity(self.location.local_path)
        if now != self._opened:
            what = "deleted" if now is None else "replaced by another file"
            raise StoreError(
                f"store {self.location.target} was {what} since this MCP server started; "
                "nothing was done. Restart the agent's session once the store is back"
            )

    def close(self) -> None:
        self.store.close()
        if self._watch is not None:
            self._watch.close()

    def _rows(self, found: list[Any], *, whole: bool) -> Rows:
        from agentmaild.trust.peers import with_origins

        return with_origins(self.store, found, whole=whole)

    def _known(self, name: str) -> None:
        from agentmaild.hot.access import mailer

        if name not in IMPLICIT_RECIPIENTS and self.store.get_agent(name) is None:
            mailer(self.store).check_known(name)

    def send(self, args: dict[str, Any]) -> dict[str, Any]:
        from agentmaild.hot.access import mailer, poke

        sent = mailer(self.store).send(
            sender=self.agent, to=args["to"], subject=args["subject"], body=args.get("body", ""),
            type=args.get("type", "status"), priority=args.get("priority", "normal"),
            thread_id=args.get("thread"), payload=_payload(args),
            idempotency_key=args.get("idempotency_key"),
        )  # fmt: skip
        if not sent.duplicate:
            poke(self.store, sorted({m.to_agent for m in sent.messages}))
        return sent.to_dict()

    def reply(self, args: dict[str, Any]) -> dict[str, Any]:
        from agentmaild.hot.access import mailer, poke

        sent = mailer(self.store).reply(
            args["id"], sender=self.agent, body=args["body"], type=args.get("type"),
            priority=args.get("priority"), payload=_payload(args),
            idempotency_key=args.get("idempotency_key"),
        )  # fmt: skip
        if not sent.duplicate:
            poke(self.store, [m.to_agent for m in sent.messages])
        return sent.to_dict()

    def inbox(self, unread: bool) -> Rows:
        found = self.store.inbox(self.agent, unread_only=unread)
        if not found:
            self._known(self.agent)
        return self._rows(found, whole=False)

    def read(self, message_id: str) -> Rows:
        from agentmaild.mail.mailer import Mailer

        return self._rows([Mailer(self.store).get(message_id)], whole=True)

    def ack(self, ids: list[str]) -> list[str]:
        for mid in ids:
            check_message_id(mid)
        return self.store.ack(ids)

    def check(self) -> tuple[str, list[str]]:
        from agentmaild.hot.check import check_inject

        return check_inject(self.agent, self.location.target)

    def ask(self, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """On a store of its own: the wait blocks this call, not the others."""
        from agentmaild.hot.access import store_at
        from agentmaild.rules.ask import ask

        store = store_at(self.location)
        try:
            question, reply = ask(
                store, self.agent, args["to"], args["subject"], args["body"],
                args.get("priority", "normal"), float(args.get("timeout_s", 600)),
            )  # fmt: skip
        finally:
            store.close()
        return question.to_dict(), None if reply is None else reply.to_dict()

    def team(self) -> Rows:
        from agentmaild.hot.access import daemon_socket
        from agentmaild.rules.team import offline_status, team_status

        sock = daemon_socket(self.store)
        status = (
            team_status(self.location, sock, _TEAM_TIMEOUT_S)
            if sock is not None
            else offline_status(self.location)
        )
        agents = {a.name: a for a in self.store.list_agents()}
        rows = []
        for row in status["agents"]:
            a = agents.get(row["agent"])
            rows.append({
                "agent": row["agent"], "role": a.capability if a else None,
                "parent": a.parent if a else None, "member": row.get("member"),
                "exec": row.get("exec"), "busy": bool(row.get("busy")),
                "busy_reason": row.get("busy_reason"), "unread": row.get("unread", 0),
            })  # fmt: skip
        return rows

    def thread(self, message_id: str) -> Rows:
        check_message_id(message_id)
        root = self.store.get_message(message_id)
        return self._rows(self.store.thread(root.thread_id or root.id if root else message_id),
                          whole=True)  # fmt: skip

    def unread_ids(self) -> set[str] | None:
        """The agent's unread ids when the store's change mark moved since the last look (on a
        connection of its own), else None."""
        from agentmaild.hot.access import store_at

        self.here()
        if self._watch is None:
            self._watch = store_at(self.location, readonly=True)
        mark = self._watch.change_mark()
        if mark is not None and mark == self._mark:
            return None
        self._mark = mark
        return {m.id for m in self._watch.inbox(self.agent, unread_only=True)}


class ApiDoor:
    """Mail through the daemon's HTTP API with a bearer token, as ``--url`` reaches it."""

    def __init__(self, api: tuple[str, str | None], agent: str) -> None:
        self.api, self.agent = api, agent

    def close(self) -> None:
        return None

    def here(self) -> None:
        return None  # the daemon's answers say when it is away

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              query: dict[str, str | None] | None = None) -> dict[str, Any]:  # fmt: skip
        from agentmaild.http.client import call

        return call(self.api, method, path, body, query)

    def send(self, args: dict[str, Any]) -> dict[str, Any]:
        fields = {"to": args["to"], "subject": args["subject"], "body": args.get("body", ""),
                  "type": args.get("type"), "priority": args.get("priority"),
                  "thread_id": args.get("thread"), "payload_json": _payload(args),
                  "idempotency_key": args.get("idempotency_key"), "from": self.agent}  # fmt: skip
        return self._call(
            "POST", "/v1/messages", {k: v for k, v in fields.items() if v is not None}
        )

    def reply(self, args: dict[str, Any]) -> dict[str, Any]:
        mid = check_message_id(args["id"])
        fields = {"body": args["body"], "type": args.get("type"),
                  "priority": args.get("priority"), "payload_json": _payload(args),
                  "idempotency_key": args.get("idempotency_key"), "from": self.agent}  # fmt: skip
        return self._call("POST", f"/v1/messages/{mid}/reply",
                          {k: v for k, v in fields.items() if v is not None})  # fmt: skip

    def inbox(self, unread: bool) -> Rows:
        query: dict[str, str | None] = {"agent": self.agent, "unread": "1" if unread else "0"}
        rows: Rows = self._call("GET", "/v1/inbox", query=query)["messages"]
        return [{k: v for k, v in r.items() if k != "body_length"} for r in rows]

    def read(self, message_id: str) -> Rows:
        return [self._call("GET", f"/v1/messages/{check_message_id(message_id)}")["message"]]

    def ack(self, ids: list[str]) -> list[str]:
        for mid in ids:
            check_message_id(mid)
        return list(self._call("POST", "/v1/ack", {"ids": ids})["acked"])

    def check(self) -> tuple[str, list[str]]:
        from agentmaild.hot.check import check_remote

        return check_remote(self.api, self.agent)

    def ask(self, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        raise UsageError("ask needs the store (--db), not --url (as `agentmaild ask`)")

    def team(self) -> Rows:
        raise UsageError("team needs the store (--db): the HTTP API has no team view")

    def thread(self, message_id: str) -> Rows:
        from agentmaild.errors import NotFound

        try:
            rows: Rows = self._call("GET", f"/v1/threads/{check_message_id(message_id)}")[
                "messages"
            ]
        except NotFound:
            return []
        return rows

    def unread_ids(self) -> set[str] | None:
        return {str(r["id"]) for r in self.inbox(True)}


Door = StoreDoor | ApiDoor
