"""The dashboard in a real Chromium against a real daemon: live team table, dead letters and
their retry button, thread pages, untrusted bodies shown as text; a screenshot of each page."""

from __future__ import annotations

import json
from typing import Any

from tests.browser.conftest import Board
from tests.support.waiting import wait_for

OBSERVE = """() => {
  window.__changes = [];
  const team = document.getElementById("team");
  new MutationObserver(() => {
    const cell = document.querySelector("#agent-alice .last");
    if (cell) { window.__changes.push([Date.now(), cell.textContent]); }
  }).observe(team, {childList: true, subtree: true, characterData: true});
}"""


def _ack_time(board: Board, delivery_id: str) -> float | None:
    """When the store recorded the delivery's ack (its history row), if it has."""
    for attempt in board.store.list_attempts(agent=None, limit=50):
        if attempt.delivery_id == delivery_id and attempt.outcome == "acked":
            return attempt.at
    return None


def _delivery_of(board: Board, message_id: str) -> str:
    def claimed() -> str | None:
        message = board.store.get_message(message_id)
        return message.delivery_id if message is not None else None

    return str(wait_for(claimed, 20, f"{message_id} to be claimed"))


def test_team_table_updates_live_within_a_second_of_a_delivery(board: Board) -> None:
    page = board.page("/")
    page.wait_for_selector("#live-status.on")  # the SSE stream is open
    page.evaluate("window.__sameDocument = true")  # gone if anything reloads the page
    page.evaluate(OBSERVE)  # the page stamps each change of alice's "last delivery" cell
    mid = board.send("alice", "live check", "does the table move?")
    delivery = _delivery_of(board, mid)
    acked_at = wait_for(lambda: _ack_time(board, delivery), 20, "alice's ack")
    page.wait_for_function(
        "id => document.querySelector('#agent-alice .last').textContent.includes(id)",
        arg=delivery, timeout=10_000,
    )
    # The stamp the page took when the row changed (wall clock, as the store's ack time), not
    # when this process heard of it: Playwright's round trips are not the dashboard's delay.
    shown_ms = page.evaluate(
        "id => window.__changes.find(([, text]) => text.includes(id))[0]", delivery
    )
    lag = shown_ms / 1000 - acked_at
    print(f"team table lag after the ack: {lag:.3f} s")
    assert lag < 1.0, f"the table showed the ack {lag:.2f}s after it"
    assert page.evaluate("window.__sameDocument") is True
    assert page.text_content("#agent-alice .last .outcome") == "acked"
    assert int(page.get_attribute("#team", "data-updates") or 0) >= 1
    board.shot(page, "team")


def test_live_updates_patch_rows_in_place_and_their_buttons_keep_working(board: Board) -> None:
    page = board.page("/")
    page.wait_for_selector("#live-status.on")
    page.evaluate("document.getElementById('agent-alice').__kept = true")
    delivery = _delivery_of(board, board.send("alice", "in place", "patch, do not replace"))
    page.wait_for_function(
        "id => document.querySelector('#agent-alice .last').textContent.includes(id)",
        arg=delivery, timeout=10_000,
    )
    # The row took the update as a patch: the same element, not a re-parsed copy.
    assert page.evaluate("document.getElementById('agent-alice').__kept") is True
    # A live update that changes a button's hx-post is seen by htmx: pause, then the same
    # button (now "resume", through the stream) resumes; a stale button would pause again.
    flash = "text => document.querySelector('#flash').textContent.includes(text)"
    try:
        page.click("#agent-alice button")
        page.wait_for_function(flash, arg="paused alice")
        page.wait_for_selector("#agent-alice button:text('resume')")
        page.click("#agent-alice button")
        page.wait_for_function(flash, arg="resumed alice")
        page.wait_for_selector("#agent-alice button:text('pause')")
    finally:  # the module's later tests deliver to alice
        board.d.cli("ctl", "resume", "agent=alice")
    # The timeline: a new attempt is one row inserted above the rows already there, which stay.
    timeline = board.page("/timeline?agent=alice")
    timeline.wait_for_selector("#live-status.on")
    first = timeline.get_attribute("#timeline tr[data-delivery]", "data-delivery")
    timeline.evaluate("document.querySelector('#timeline tr[data-delivery]').__kept = true")
    newer = _delivery_of(board, board.send("alice", "one more row", "a new timeline row"))
    timeline.wait_for_selector(f"#timeline tr[data-delivery='{newer}']", timeout=10_000)
    order = timeline.eval_on_selector_all(
        "#timeline tr[data-delivery]", "rows => rows.map(r => [r.dataset.delivery, !!r.__kept])"
    )
    assert order[0] == [newer, False] and [first, True] in order, order


def test_a_dead_letter_appears_and_its_retry_button_redelivers_it(board: Board) -> None:
    page = board.page("/dead")
    page.wait_for_selector("#live-status.on")
    mid = board.send("carol", "fails twice", "carol's command fails on runs 1 and 2")
    delivery = _delivery_of(board, mid)
    row = f"#dead-{delivery}"
    page.wait_for_selector(row, timeout=20_000)  # arrives over SSE, no reload
    assert "exit" in (page.text_content(f"{row} .error") or "")
    board.shot(page, "dead-letters")
    page.click(f"{row} button.retry")
    page.wait_for_selector("#flash .flash.ok")
    assert delivery in (page.text_content("#flash") or "")
    page.wait_for_selector(row, state="detached", timeout=20_000)
    message = wait_for(lambda: (m := board.store.get_message(mid)) and m.read and m, 20,
                       "the retried message to be acked")  # fmt: skip
    assert message.acked_by == delivery
    outcomes = [a.outcome for a in board.store.list_attempts(agent="carol") if
                a.delivery_id == delivery]  # fmt: skip
    assert outcomes[0] == "acked" and outcomes.count("dead") == 1, outcomes


def test_thread_page_shows_messages_and_script_bodies_as_text(board: Board) -> None:
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    first = board.send("alice", "<b>plan</b> for the store", hostile, "--type", "question",
                       "--priority", "high", "--payload", json.dumps({"step": "<i>3</i>"}))
    wait_for(lambda: (m := board.store.get_message(first)) and m.read, 20, "alice's ack")
    reply = board.d.cli("reply", first, "--from", "alice", "--body", "on it: <u>ok</u>")
    assert reply.returncode == 0, reply.stderr
    page = board.page(f"/mail/thread/{first}")
    articles = page.locator("article.message")
    assert articles.count() == 2
    assert articles.nth(0).locator("pre.body").text_content() == hostile
    assert articles.nth(0).locator(".subject").text_content() == "<b>plan</b> for the store"
    assert "on it: <u>ok</u>" in (articles.nth(1).locator("pre.body").text_content() or "")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main script, main img, main b, main u").count() == 0
    assert '"step": "<i>3</i>"' in (articles.nth(0).locator("pre.payload").text_content() or "")
    assert "read by alice" in (articles.nth(0).locator(".read").text_content() or "")
    assert "acked" in (articles.nth(0).locator(".delivery").text_content() or "")
    board.shot(page, "thread")


def test_mail_search_and_timeline_pages(board: Board) -> None:
    board.send("alice", "weekly numbers", "the quarterly zeppelin report is ready")
    page: Any = board.page("/mail")
    page.fill("input[name=q]", "zeppelin")
    page.wait_for_selector("#results li")  # htmx live search
    assert "weekly numbers" in (page.text_content("#results") or "")
    assert page.text_content("#results mark") == "zeppelin"
    board.shot(page, "mail")
    page.goto(board.url + "/timeline?agent=alice")
    page.wait_for_selector("#timeline tr[data-delivery]")
    cells = page.locator("#timeline tbody tr td:nth-child(2)").all_text_contents()
    agents = {c.strip() for c in cells}
    assert agents == {"alice"}
    assert page.locator("svg.spark rect").count() >= 1
    page.goto(board.url + "/timeline")
    page.wait_for_selector("#timeline tr[data-delivery]")
    board.shot(page, "timeline")
