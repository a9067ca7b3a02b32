"""The KV block pool of one fake engine: allocation, prefix caching and LRU eviction.

Blocks are plain integers. A block is *active* while at least one running sequence holds it
(reference count > 0), *cached* when no sequence holds it but it still carries a prefix hash (it
can be reused by a later prompt with the same prefix, or evicted), and *free* otherwise. Free
blocks are handed out first; when none are left the least recently released cached block is
evicted, which emits a ``removed`` KV event. Registering a hash for a newly computed full block
emits a ``stored`` event. Memory stays proportional to the blocks in use, not to the pool's
size, so hundreds of idle engines fit in one process.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from servecert.protocol import streams

EventSink = Callable[[str, tuple[int, ...], int | None], None]


class PoolExhausted(Exception):
    """Not enough free or evictable blocks for an allocation."""


class KvPool:
    def __init__(self, num_blocks: int, block_size: int, on_event: EventSink | None = None) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._on_event = on_event
        self._next_unused = 0
        self._free: list[int] = []
        self._refs: dict[int, int] = {}
        self._hash_of: dict[int, int] = {}
        self._block_of: dict[int, int] = {}
        self._cached: OrderedDict[int, None] = OrderedDict()  # refcount 0, hashed; oldest first
        self.queries = 0  # prompt tokens looked up for prefix hits
        self.hits = 0  # of which found cached

    # -- sizes -------------------------------------------------------------------------------
    @property
    def active_blocks(self) -> int:
        return len(self._refs)

    @property
    def available_blocks(self) -> int:
        return self.num_blocks - len(self._refs)

    def usage(self) -> float:
        return len(self._refs) / self.num_blocks

    # -- prefix caching ----------------------------------------------------------------------
    def match_prefix(self, hashes: Sequence[int]) -> list[int]:
        """Take a reference on the longest run of cached blocks matching ``hashes`` from the start."""
        taken: list[int] = []
        for h in hashes:
            block = self._block_of.get(h)
            if block is None:
                break
            self._ref(block)
            taken.append(block)
        return taken

    def record_query(self, queried_tokens: int, hit_tokens: int) -> None:
        self.queries += queried_tokens
        self.hits += hit_tokens

    def register(self, block: int, block_hash: int, parent_hash: int | None) -> int:
        """Give a computed full block its prefix hash; returns the block to keep (may be a duplicate's)."""
        existing = self._block_of.get(block_hash)
        if existing is not None and existing != block:
            # Another sequence computed the same prefix meanwhile: share it, free ours.
            self._ref(existing)
            self.release([block])
            return existing
        if existing is None:
            self._hash_of[block] = block_hash
            self._block_of[block_hash] = block
            self._emit(streams.BLOCK_STORED, (block_hash,), parent_hash)
        return block

    # -- allocation --------------------------------------------------------------------------
    def can_allocate(self, n: int) -> bool:
        return n <= self.num_blocks - self._next_unused + len(self._free) + len(self._cached)

    def allocate(self, n: int) -> list[int]:
        if not self.can_allocate(n):
            raise PoolExhausted(f"need {n} blocks, {self.available_blocks} not in use")
        blocks: list[int] = []
        for _ in range(n):
            if self._free:
                block = self._free.pop()
            elif self._next_unused < self.num_blocks:
                block = self._next_unused
                self._next_unused += 1
            else:
                block = self._evict_one()
            self._refs[block] = 1
            blocks.append(block)
        return blocks

    def release(self, blocks: Sequence[int]) -> None:
        """Drop one reference on each block; hashed blocks become cached, others free."""
        for block in blocks:
            refs = self._refs[block] - 1
            if refs > 0:
                self._refs[block] = refs
                continue
            del self._refs[block]
            if block in self._hash_of:
                self._cached[block] = None
            else:
                self._free.append(block)

    def clear(self) -> None:
        """Forget every cached prefix (active blocks are kept)."""
        for block in list(self._cached):
            self._forget(block)
            self._free.append(block)
        self._cached.clear()
        self._emit(streams.ALL_BLOCKS_CLEARED, (), None)

    # -- internals ---------------------------------------------------------------------------
    def _ref(self, block: int) -> None:
        refs = self._refs.get(block, 0)
        if refs == 0:
            self._cached.pop(block, None)
        self._refs[block] = refs + 1

    def _evict_one(self) -> int:
        block, _ = self._cached.popitem(last=False)
        self._forget(block)
        return block

    def _forget(self, block: int) -> None:
        block_hash = self._hash_of.pop(block)
        del self._block_of[block_hash]
        self._emit(streams.BLOCK_REMOVED, (block_hash,), None)

    def _emit(self, kind: str, hashes: tuple[int, ...], parent: int | None) -> None:
        if self._on_event is not None:
            self._on_event(kind, hashes, parent)
