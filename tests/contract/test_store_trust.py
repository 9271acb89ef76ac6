"""The trust-domain part of the MailStore contract (schema 5), on all three stores."""

from __future__ import annotations

import pytest

from agentmaild.errors import StoreError
from agentmaild.store.base import MailStore
from agentmaild.trust.peers import Peer, PeerOrigin
from tests.contract.test_store_contract import T0, make, put


@pytest.fixture
def store(any_store: MailStore) -> MailStore:
    return any_store


def test_peers_are_pinned_listed_and_removed(store: MailStore) -> None:
    a = Peer(name="a", public_key="ed25519:AAAA", key_id="k1", url="http://x", created_at=T0)
    b = Peer(name="b", public_key="ed25519:BBBB", key_id="k2", url=None, created_at=T0 + 1)
    store.add_peer(b)
    store.add_peer(a)
    assert store.list_peers() == [a, b]
    assert store.find_peer("a") == a and store.find_peer("c") is None
    with pytest.raises(StoreError, match="already added"):
        store.add_peer(a)
    assert store.remove_peer("a") is True and store.remove_peer("a") is False
    assert store.list_peers() == [b]


def test_a_nonce_is_claimed_once_until_it_expires(store: MailStore) -> None:
    assert store.claim_nonce("n1", peer="a", expires_at=T0 + 300, now=T0) is True
    assert store.claim_nonce("n1", peer="a", expires_at=T0 + 300, now=T0 + 299) is False
    assert store.claim_nonce("n2", peer="a", expires_at=T0 + 600, now=T0 + 1) is True
    # Once its window has passed it is forgotten (an envelope that old is refused anyway).
    assert store.claim_nonce("n1", peer="a", expires_at=T0 + 700, now=T0 + 301) is True


def test_origins_and_relay_marks(store: MailStore) -> None:
    local, out1, out2 = make("bob"), make("peer:b/alice"), make("peer:b/carol", at=T0 + 1)
    put(store, local, out1, out2)
    assert [m.id for m in store.relay_pending()] == [out1.id, out2.id]
    store.mark_relayed(out1.id, peer="b", at=T0)
    store.mark_relayed(out1.id, peer="b", at=T0 + 5)  # idempotent
    assert [m.id for m in store.relay_pending()] == [out2.id]
    origin = PeerOrigin(message_id=local.id, peer="a", key_id="k1", origin_id="msg-remote1")
    store.record_peer_origin(origin)
    store.record_peer_origin(origin)
    assert store.peer_origin(local.id) == origin and store.peer_origin(out1.id) is None
