"""ids: message ids and ISO stamps, as every send makes them (twice a send for the stamp)."""

from __future__ import annotations

import datetime as dt
import re

from agentmaild.ids import ID_RE, iso_now, new_id


def _reference(t: float) -> str:
    d = dt.datetime.fromtimestamp(t, tz=dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + f".{int(t * 1000) % 1000:03d}Z"


def test_iso_now_gives_each_instant_its_own_stamp_whatever_was_asked_before() -> None:
    instants = [
        1_700_000_000.0,
        1_700_000_000.5,
        1_700_000_000.0,
        1_800_000_123.456,
        1_800_000_123.456,
        0.001,
        1_700_000_000.5,
    ]
    assert [iso_now(t) for t in instants] == [_reference(t) for t in instants]
    assert iso_now(1_800_000_123.456) == "2027-01-15T08:02:03.456Z"


def test_iso_now_without_an_instant_is_the_clock_now() -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    stamp = iso_now()
    after = dt.datetime.now(dt.UTC)
    seen = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
    assert before <= seen <= after


def test_new_ids_are_well_formed_unique_sortable_and_random_over_the_whole_alphabet() -> None:
    ids = [new_id("msg") for _ in range(20_000)]  # many share a millisecond
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(ID_RE.fullmatch(i) and len(i) == 4 + 18 for i in ids)
    tails = "".join(i[-6:] for i in ids)
    assert set(tails) == set("0123456789abcdefghijklmnopqrstuvwxyz")
    # the per-millisecond sequence (3 chars before the random part) counts up within one ms
    seqs = [i[13:16] for i in ids]
    assert "000" in seqs and any(s != "000" for s in seqs)
    assert all(re.fullmatch(r"[a-z0-9]{3}", s) for s in seqs)
