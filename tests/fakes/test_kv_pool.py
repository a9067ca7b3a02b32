"""KV block pool: prefix hits, LRU eviction with events, exhaustion."""

from __future__ import annotations

import pytest

from servecert.fakes.kv_pool import KvPool, PoolExhausted
from servecert.protocol import streams

Event = tuple[str, tuple[int, ...], int | None]


def pool(num_blocks: int, events: list[Event]) -> KvPool:
    return KvPool(num_blocks, 16, lambda kind, hashes, parent: events.append((kind, hashes, parent)))


def test_a_released_hashed_block_is_found_again_by_its_prefix() -> None:
    events: list[Event] = []
    p = pool(8, events)
    [block] = p.allocate(1)
    kept = p.register(block, 111, None)
    p.release([kept])
    assert p.active_blocks == 0
    assert p.match_prefix([111, 222]) == [block]
    assert p.active_blocks == 1
    assert events == [(streams.BLOCK_STORED, (111,), None)]


def test_eviction_takes_the_least_recently_released_block_and_says_so() -> None:
    events: list[Event] = []
    p = pool(2, events)
    a, b = p.allocate(2)
    p.register(a, 1, None)
    p.register(b, 2, None)
    p.release([b])
    p.release([a])  # a released last: b is the LRU victim
    [c] = p.allocate(1)
    assert c == b
    assert (streams.BLOCK_REMOVED, (2,), None) in events
    assert p.match_prefix([1]) == [a]


def test_blocks_in_use_are_never_evicted() -> None:
    p = pool(2, [])
    p.allocate(2)
    assert not p.can_allocate(1)
    with pytest.raises(PoolExhausted):
        p.allocate(1)


def test_registering_an_already_known_prefix_shares_the_existing_block() -> None:
    p = pool(4, [])
    a, b = p.allocate(2)
    assert p.register(a, 5, None) == a
    assert p.register(b, 5, None) == a  # b is freed, a is shared
    assert p.active_blocks == 1
