"""The operator's seat: Needs you, the agent pages, the team picture, and writing mail.

Mail written here is the operator's (``mail.vocab.OPERATOR``) and goes through ``Mailer`` (the
rules, limits and loop guard the CLI's ``send``/``reply`` apply), on the store's worker thread,
then wakes its recipients as a CLI send's poke does (a waiting ``ask`` among them). Every write
goes through ``_Views.write``: a session with ``control``, same origin and its CSRF token.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agentmaild.errors import ControlError, NotFound, ValidationError
from agentmaild.ids import check_message_id, check_name
from agentmaild.mail.mailer import Mailer, Sent
from agentmaild.mail.vocab import OPERATOR
from agentmaild.store.reader import THREAD_WINDOW
from agentmaild.web.guard import Refused, Session
from agentmaild.web.logtail import read_tail

if TYPE_CHECKING:
    from agentmaild.web.dashboard import Dashboard
    from agentmaild.web.views import _Views

FORM_MAX_BYTES = 1_100_000  # a form's body: the largest mail body the limits allow, and change
AGENT_THREADS = 20
PRIORITIES = ("low", "normal", "high", "urgent")


def operator_routes(views: _Views) -> list[BaseRoute]:
    pages = _Pages(views)
    return [
        Route("/needs-you", views.page(pages.needs), methods=["GET"]),
        Route("/agents/{name}", views.page(pages.agent), methods=["GET"]),
        Route("/graph", views.page(pages.graph), methods=["GET"]),
        Route("/mail/send", pages.compose, methods=["POST"]),
        Route("/mail/reply/{message_id}", pages.reply, methods=["POST"]),
        Route("/actions/interrupt/{name}", pages.interrupt, methods=["POST"]),
        Route("/actions/budget/{name}", pages.budget, methods=["POST"]),
    ]


class _Pages:
    def __init__(self, views: _Views) -> None:
        self.v = views
        self.b: Dashboard = views.b

    # -- pages ----------------------------------------------------------------------------
    async def needs(self, request: Request, session: Session) -> Response:
        items = await self.b.extras.needs_now()
        return await self.v._page(request, session, "needs.html", items=items, live="needs")

    async def agent(self, request: Request, session: Session) -> Response:
        name = request.path_params["name"]
        try:
            check_name(name, "agent")
        except ValidationError as exc:
            return self.v.refused(Refused(400, exc.message))
        agent = await self.b.extras.agent_data(name)
        if agent is None:
            return self.v.refused(Refused(404, f"no agent named {name}"))
        reader = self.b.reader
        timeline = await reader.call(reader.timeline, name, 20)
        threads = await reader.call(_agent_threads, reader, name)
        lines, exists = read_tail(self.b.extras.logs.path(name))
        return await self.v._page(
            request, session, "agent.html", a=agent, agent=name, threads=threads,
            loop=self.b.daemon.supervisor.snapshot().get(name), lines=lines, exists=exists,
            log_path=self.b.extras.logs.path(name), **timeline,
            live=[f"agent:{name}", f"log:{name}", f"timeline:{name}"],
        )  # fmt: skip

    async def graph(self, request: Request, session: Session) -> Response:
        from agentmaild.web import graph

        data = await self.b.reader.call(graph.read, self.b.reader)
        return await self.v._page(request, session, "graph.html", **data, live="graph")

    # -- writes -------------------------------------------------------------------------------
    async def compose(self, request: Request) -> Response:
        async def do() -> str:
            form = await _form(request)
            to = form.get("to", "").strip()
            if not to:
                raise ValidationError("to: give an agent, @group or queue:NAME")
            if form.get("interrupt"):  # the CLI's send --interrupt: one agent
                return await interrupt_as_operator(self.b, to, form.get("subject", "").strip(),
                                                   form.get("body", ""))  # fmt: skip
            sent = await send_as_operator(self.b, lambda m: m.send(
                sender=OPERATOR, to=to, subject=form.get("subject", "").strip(),
                body=form.get("body", ""), priority=_priority(form)))  # fmt: skip
            return _sent_text(sent)

        return await self.v.write(request, do)

    async def reply(self, request: Request) -> Response:
        message_id = request.path_params["message_id"][:100]

        async def do() -> str:
            check_message_id(message_id)
            form = await _form(request)
            body = form.get("body", "")
            if not body.strip():
                raise ValidationError("body: write the reply first")
            sent = await send_as_operator(
                self.b, lambda m: m.reply(message_id, sender=OPERATOR, body=body))
            store = self.b.daemon.store
            original = await store.run_sync(store.sync.get_message, message_id)
            if original is not None and original.to_agent == OPERATOR:  # answered: read
                await store.run_sync(store.sync.ack, [message_id])
            return _sent_text(sent)

        return await self.v.write(request, do)


    async def interrupt(self, request: Request) -> Response:
        name = request.path_params["name"][:100]

        async def do() -> str:
            reason = (await _form(request)).get("reason", "").strip()
            return await interrupt_as_operator(self.b, name, "", reason)

        return await self.v.write(request, do)

    async def budget(self, request: Request) -> Response:
        """Raise an agent's budget for today (``raise``: USD) or reset today's count (``reset``):
        the CLI's ``agents budget NAME --raise USD | --reset``."""
        name = request.path_params["name"][:100]

        async def do() -> str:
            from agentmaild.rules.budget import raise_budget, reset_budget

            check_name(name, "agent")
            form, store, now = await _form(request), self.b.daemon.store, time.time()
            if form.get("reset"):
                state = await store.run_sync(reset_budget, store.sync, name, now)
            else:
                state = await store.run_sync(raise_budget, store.sync, name, _usd(form), now)
            if state is None:
                raise NotFound(f"no agent named {name}")
            self.b.daemon.woken([name])
            limit = "no budget" if state.limit_usd is None else f"${state.limit_usd:.2f}"
            return f"{name}: ${state.spent_usd:.4f} spent today of {limit}"

        return await self.v.write(request, do)


async def interrupt_as_operator(board: Dashboard, to: str, subject: str, body: str) -> str:
    """The CLI's ``interrupt`` (and ``send --interrupt``) as the operator: the interrupt's mail
    through ``rules.interrupts``, then the daemon's loop stops the turn it opens the next of."""
    from agentmaild.rules.interrupts import interrupt_text, send_interrupt

    check_name(to, "agent")
    daemon = board.daemon
    mailer = Mailer(daemon.store.sync, daemon.config.limits)
    default_subject, text = interrupt_text(OPERATOR, body)
    message, again = await daemon.store.run_sync(lambda: send_interrupt(
        mailer, sender=OPERATOR, to=to, subject=subject or default_subject, body=text))  # fmt: skip
    if again:
        return f"already sent: {message.id} (the same interrupt within the duplicate window)"
    try:
        args = {"agent": to, "message_id": message.id, "by": OPERATOR, "reason": body or None}
        answer = await board.control.handle("interrupt", args)
    except ControlError as exc:  # no loop for the agent here: the mail opens its next turn
        return f"sent {message.id}; {to}: not interrupted ({exc.message})"
    verb = "interrupted" if answer.get("interrupted") else "not interrupted"
    return f"sent {message.id}; {to}: {verb} ({answer.get('detail')})"


async def send_as_operator(board: Dashboard, how: Any) -> Sent:
    """``how(mailer)`` on the store's thread, then the recipients (and their askers) woken."""
    daemon = board.daemon
    mailer = Mailer(daemon.store.sync, daemon.config.limits)
    sent: Sent = await daemon.store.run_sync(how, mailer)
    if not sent.duplicate:
        daemon.woken(sorted({m.to_agent for m in sent.messages}))
    return sent


async def act_on_mail(board: Dashboard, action: str, ref: str) -> str:
    """``release`` a thread the loop guard holds; mark a message ``read`` (its escalation is
    dealt with): the CLI's ``limits reset --thread`` and ``ack``."""
    check_message_id(ref)
    store = board.daemon.store
    if action == "release":
        n = await store.run_sync(store.sync.release_thread, ref)
        if not n:
            raise NotFound(f"thread {ref} is not held")
        return f"released thread {ref}"
    done = await store.run_sync(store.sync.ack, [ref])
    if not done:
        raise NotFound(f"{ref} is unknown or read already")
    return f"marked {ref} read"


def _agent_threads(reader: Any, name: str) -> list[dict[str, Any]]:
    return list(reader.rows("agent_threads", agent=name, window=THREAD_WINDOW,
                            limit=AGENT_THREADS))  # fmt: skip


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form (what htmx posts), bounded."""
    body = await request.body()
    if len(body) > FORM_MAX_BYTES:
        raise ValidationError(f"form: larger than {FORM_MAX_BYTES} bytes")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValidationError(f"form: unreadable ({exc})") from None
    return dict(pairs)


def _usd(form: dict[str, str]) -> float:
    try:
        usd = float(form.get("raise", ""))
    except ValueError:
        usd = 0.0
    if not 0 < usd <= 1_000_000:  # NaN fails too
        raise ValidationError("raise: an amount of USD above 0 (or reset)")
    return usd


def _priority(form: dict[str, str]) -> str:
    priority = form.get("priority") or "normal"
    if priority not in PRIORITIES:
        raise ValidationError(f"priority: one of {', '.join(PRIORITIES)}")
    return priority


def _sent_text(sent: Sent) -> str:
    if sent.duplicate:
        return f"already sent: {', '.join(sent.ids)} (a repeat within the duplicate window)"
    to = ", ".join(sorted({m.to_agent for m in sent.messages}))
    return f"sent {', '.join(sent.ids)} to {to}"
