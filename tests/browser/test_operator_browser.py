"""The operator's seat in a real Chromium against a real daemon: mail written from the page is
delivered and acked on the live team table, a running ``agentmaild ask --to operator`` is answered
from Needs you, an escalation and a dead letter are resolved there, the agent page's log tail
shows a line the agent writes within a second, and the graph draws an edge for mail just sent;
untrusted text is shown as text on each of them. A screenshot of each page."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.browser.conftest import Board
from tests.support.waiting import wait_for

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
STAMP_LAST_CELL = """() => {
  window.__changes = [];
  new MutationObserver(() => {
    const cell = document.querySelector("#agent-alice .last");
    if (cell) { window.__changes.push([Date.now(), cell.textContent]); }
  }).observe(document.getElementById("team"),
             {childList: true, subtree: true, characterData: true});
}"""


def _flash(page: Any, text: str) -> None:
    page.wait_for_function("t => document.querySelector('#flash').textContent.includes(t)",
                           arg=text, timeout=15_000)  # fmt: skip


def _no_markup_ran(page: Any, where: str) -> None:
    assert page.evaluate("window.__pwned") is None
    assert page.locator(f"{where} script, {where} img").count() == 0


def test_compose_from_the_team_page_is_delivered_and_acked_without_a_reload(board: Board) -> None:
    page = board.page("/")
    page.wait_for_selector("#live-status.on")
    page.evaluate("window.__sameDocument = true")
    page.evaluate(STAMP_LAST_CELL)
    page.click("details.compose-box summary")
    page.fill("form.compose input[name=to]", "alice")
    page.fill("form.compose input[name=subject]", "from the page")
    page.fill("form.compose textarea[name=body]", "written in the dashboard " + HOSTILE)
    page.select_option("form.compose select[name=priority]", "high")
    board.shot(page, "compose")
    page.click("form.compose button[type=submit]")
    _flash(page, "sent msg-")
    flash = page.text_content("#flash") or ""
    mid = flash.split("sent ", 1)[1].split(" ", 1)[0]
    message = board.store.get_message(mid)
    assert message is not None and message.from_agent == "operator"
    assert message.priority == "high" and message.body.endswith(HOSTILE)
    delivery = str(wait_for(lambda: (m := board.store.get_message(mid)) and m.read
                            and m.delivery_id, 20, "alice to ack the mail"))  # fmt: skip
    page.wait_for_function(
        "id => document.querySelector('#agent-alice .last').textContent.includes(id)",
        arg=delivery, timeout=10_000,
    )
    assert page.text_content("#agent-alice .last .outcome") == "acked"
    assert page.evaluate("window.__sameDocument") is True  # no reload
    # The thread shows the body as text and offers a reply box that writes as the operator.
    thread = board.page(f"/mail/thread/{mid}")
    assert thread.locator("pre.body").first.text_content() == message.body
    _no_markup_ran(thread, "main")
    thread.fill("form.reply textarea[name=body]", "and a reply from the thread page")
    thread.click("form.reply button[type=submit]")
    _flash(thread, "to alice")
    replies = [m for m in board.store.thread(mid) if m.id != mid]
    assert [(m.from_agent, m.to_agent, m.body) for m in replies] == [
        ("operator", "alice", "and a reply from the thread page")]


def test_ask_to_the_operator_is_answered_from_needs_you(board: Board) -> None:
    d = board.d
    asker = subprocess.Popen(
        [sys.executable, "-m", "agentmaild", "ask", "--from", "dave", "--to", "operator",
         "-s", "which <b>branch</b>?", "-b", "merge to main or " + HOSTILE, "--timeout", "60",
         "--db", str(d.db)],
        env=d.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        page = board.page("/")
        page.wait_for_selector("#live-status.on")
        # The header's count moves on any page, without a reload.
        page.wait_for_function(
            "() => Number(document.querySelector('#needs-n .count').textContent) >= 1",
            timeout=15_000)  # fmt: skip
        page.click("#needs-n a")
        item = page.locator("li.need.question", has_text="which <b>branch</b>?")
        item.wait_for(timeout=15_000)
        assert "merge to main or " + HOSTILE in (item.locator("pre.body").text_content() or "")
        _no_markup_ran(page, "#needs")
        assert asker.poll() is None  # still blocked on its ask
        board.shot(page, "needs-you")
        item.locator("textarea[name=body]").fill("main, after the tests pass")
        item.locator("button[type=submit]").click()
        out, err = asker.communicate(timeout=20)
        assert asker.returncode == 0, err
        assert "main, after the tests pass" in out
        item.wait_for(state="detached", timeout=10_000)  # answered: off the list, live
    finally:
        if asker.poll() is None:
            asker.kill()
            asker.wait()


def test_an_escalation_and_a_dead_letter_are_resolved_from_needs_you(board: Board) -> None:
    page = board.page("/needs-you")
    page.wait_for_selector("#live-status.on")
    late = board.send("bob", "urgent, unread", "nobody reads bob's mail", "--priority", "urgent")
    escalated = page.locator(f"li.need.escalated[data-ref='{late}']")
    escalated.wait_for(timeout=20_000)  # after 2 s unread, over the live stream
    dead_mid = board.send("carol", "fails twice again", "carol fails on her first two runs")
    delivery = str(wait_for(lambda: (m := board.store.get_message(dead_mid)) and m.delivery_id,
                            20, "carol's delivery"))  # fmt: skip
    dead = page.locator(f"li.need.dead[data-ref='{delivery}']")
    dead.wait_for(timeout=20_000)
    kinds = page.eval_on_selector_all("li.need", "els => els.map(e => e.dataset.kind)")
    assert "escalated" in kinds and "dead" in kinds
    board.shot(page, "needs-you-resolving")
    escalated.locator("button", has_text="mark read").click()
    _flash(page, f"marked {late} read")
    escalated.wait_for(state="detached", timeout=10_000)
    assert (m := board.store.get_message(late)) is not None and m.read
    dead.locator("button.retry").click()
    _flash(page, f"requeued {delivery}")
    dead.wait_for(state="detached", timeout=20_000)
    wait_for(lambda: (m := board.store.get_message(dead_mid)) and m.read, 20, "the retry's ack")


def test_agent_page_tails_the_log_within_a_second_and_shows_it_as_text(board: Board) -> None:
    page = board.page("/agents/dave")
    page.wait_for_selector("#live-status.on")
    assert "spawn" in (page.text_content("#agent dl") or "")
    assert "bob" in (page.text_content("#agent dl") or "")  # its parent
    page.evaluate("""() => {
      window.__lines = [];
      const stamps = () => Array.from(document.querySelectorAll('#log .line'))
        .map(span => span.textContent.match(/^wrote-at (\\d+\\.\\d+)$/))
        .filter(m => m).map(m => m[1]);
      const before = new Set(stamps());  // lines of earlier deliveries
      new MutationObserver(() => {
        for (const at of stamps()) {
          if (!before.has(at) && !window.__lines.some(([, seen]) => seen === at)) {
            window.__lines.push([Date.now(), at]);
          }
        }
      }).observe(document.getElementById('log'),
                 {childList: true, subtree: true, characterData: true});
    }""")
    mid = board.send("dave", "log please", "print this: " + HOSTILE)
    page.wait_for_function("() => window.__lines.length >= 1", timeout=20_000)
    shown_ms, wrote = page.evaluate("window.__lines[0]")
    lag = shown_ms / 1000 - float(wrote)
    print(f"log tail lag: {lag:.3f} s")
    assert lag < 1.0, f"the log line showed {lag:.2f} s after the agent wrote it"
    assert HOSTILE in (page.text_content("#log pre") or "")
    _no_markup_ran(page, "#log")
    wait_for(lambda: (m := board.store.get_message(mid)) and m.read, 20, "dave's ack")
    page.wait_for_selector("#timeline tr[data-delivery]", timeout=10_000)  # recent deliveries
    page.reload()  # the thread list is drawn with the page
    assert page.locator("table.threads a", has_text="log please").count() == 1
    page.wait_for_selector("#live-status.on")
    board.shot(page, "agent")


def test_graph_draws_an_edge_for_mail_just_sent(board: Board) -> None:
    page = board.page("/graph")
    page.wait_for_selector("#live-status.on")
    edge = "svg.graph g.edge[data-from='carol'][data-to='dave']"
    assert page.locator(edge).count() == 0
    sent = board.d.cli("send", "--from", "carol", "--to", "dave", "-s", "graph me", "-b", HOSTILE)
    assert sent.returncode == 0, sent.stderr
    page.wait_for_selector(edge, timeout=10_000)  # live, no reload
    assert page.get_attribute(edge, "data-n") == "1"
    assert page.locator("svg.graph a.node[href='/agents/dave']").count() == 1
    assert page.locator("svg.graph line.parent").count() >= 1  # bob → dave
    _no_markup_ran(page, "#graph")
    page.click("svg.graph a.node[href='/agents/dave'] circle")
    page.wait_for_url("**/agents/dave")
    page.go_back()
    page.wait_for_selector(edge)
    board.shot(page, "graph")


def test_a_turns_cost_shows_on_the_agent_page_and_over_budget_it_is_listed(board: Board) -> None:
    """The stand-in prices each turn at $0.0042: two turns put erin over its $0.005 a day; its
    page shows the cost, Needs you lists it, and a raise from there is taken."""
    from tests.integration.test_costs import CLAUDE_FLAGS
    from tests.support.daemon import agent_cmd

    command = " ".join(agent_cmd("fake_claude.py", *CLAUDE_FLAGS))
    added = board.d.cli("agents", "add", "erin", "-c", "builder", "--channel", "spawn",
                        "--command", command, "--budget-usd", "0.005")  # fmt: skip
    assert added.returncode == 0, added.stderr
    for n in (1, 2):
        mid = board.send("erin", f"costly {n}", "x")
        wait_for(lambda m=mid: (got := board.store.get_message(m)) is not None and got.read, 20,
                 f"erin's turn {n}")  # fmt: skip
    page = board.page("/agents/erin")
    page.wait_for_function("() => document.querySelector('dd.cost').textContent.includes('over')")
    cost = page.text_content("dd.cost") or ""
    assert "$0.0084" in cost and "2 turns" in cost and "budget $0.01 a day" in cost, cost
    needs = board.page("/needs-you")
    needs.wait_for_selector("li.need.budget")
    assert "erin is over its daily budget" in (needs.text_content("li.need.budget") or "")
    board.shot(needs, "needs-you-budget")
    needs.fill("form.budget input[name=raise]", "0.01")
    needs.click("form.budget button[type=submit]")
    _flash(needs, "erin: $0.0084 spent today of $0.01")
    needs.wait_for_selector("li.need.budget", state="detached")
