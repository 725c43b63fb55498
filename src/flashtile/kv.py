"""A paged KV cache manager: pages of K/V storage, a page table, per-sequence lengths.

The storage is what ``flashtile.flash_attn_with_kvcache`` reads as a paged cache::

    k_cache[layer], v_cache[layer]   (num_pages, page_size, nheads_kv, headdim)
    page_table                       (max_batch, max_pages_per_seq) int32, on the device
    cache_seqlens                    (max_batch,) int32, on the device

Sequences live in slots 0..max_batch-1. The manager keeps the truth on the host (each
slot's page list and length), so it checks every value the kernel would trust (page
ids in range, lengths within a sequence's pages) with no device synchronisation, and
mirrors the changes into the device tensors with small host-to-device copies. A decode
step over slots 0..B-1 reads ``page_table[:B]`` and ``cache_seqlens[:B]`` as views;
their addresses never change, so the step can be captured in a CUDA graph.

Typical step (append one token to every active sequence)::

    cache.reserve(slots, 1)                      # grow: allocate pages as needed
    out = flash_attn_with_kvcache(q, cache.k_cache[layer], cache.v_cache[layer], k, v,
                                  cache_seqlens=cache.cache_seqlens[:B],
                                  page_table=cache.page_table[:B], causal=True)
    cache.advance(slots, 1)                      # after every layer has appended

``debug=True`` also compares the device tensors with the host state after each change
(synchronises: tests and debugging only).
"""

from __future__ import annotations

import torch

from .ops.kvcache import PAGE_SIZES

__all__ = ["PagedKVCache", "OutOfPages"]


class OutOfPages(RuntimeError):
    """The pool has fewer free pages than a request needs."""


class PagedKVCache:
    """Pages for a batch of sequences of different lengths; see the module docstring.

    Args:
        num_pages: pages in the pool (shared by all slots).
        page_size: tokens per page, a power of two from 16 to 256.
        nheads_kv, head_dim: the cache's head count and head dim.
        max_batch: number of sequence slots (rows of the page table).
        max_pages_per_seq: page-table width; a sequence holds at most
            ``max_pages_per_seq * page_size`` tokens (default: num_pages).
        num_layers: one K and one V pool per layer, sharing the page table.
        dtype, device: of the K/V storage.
        debug: check the device mirrors against the host state after each change.
    """

    def __init__(
        self, num_pages: int, page_size: int, nheads_kv: int, head_dim: int, *, max_batch: int,
        max_pages_per_seq: int | None = None, num_layers: int = 1,
        dtype: torch.dtype = torch.bfloat16, device: torch.device | str = "cuda",
        debug: bool = False,
    ):
        if page_size not in PAGE_SIZES:
            raise ValueError(f"page_size must be one of {PAGE_SIZES}, got {page_size}")
        for name, val in (("num_pages", num_pages), ("nheads_kv", nheads_kv),
                          ("head_dim", head_dim), ("max_batch", max_batch),
                          ("num_layers", num_layers)):
            if not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        max_pages_per_seq = num_pages if max_pages_per_seq is None else max_pages_per_seq
        if not isinstance(max_pages_per_seq, int) or max_pages_per_seq < 1:
            raise ValueError(f"max_pages_per_seq must be a positive int, got {max_pages_per_seq!r}")
        self.page_size = page_size
        self.num_pages = num_pages
        self.max_batch = max_batch
        self.max_pages_per_seq = max_pages_per_seq
        self.debug = debug
        device = torch.device(device)
        shape = (num_pages, page_size, nheads_kv, head_dim)
        self.k_cache = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v_cache = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        # unused entries point at page 0: in range, so a stray read stays inside the pool
        self.page_table = torch.zeros((max_batch, max_pages_per_seq), dtype=torch.int32,
                                      device=device)
        self.cache_seqlens = torch.zeros((max_batch,), dtype=torch.int32, device=device)
        # host truth: free pages (lowest id first on reuse), each slot's pages and length
        self._free = list(range(num_pages - 1, -1, -1))
        self._pages: list[list[int] | None] = [None] * max_batch
        self._lens = [0] * max_batch

    # ------------------------------------------------------------------ queries

    @property
    def capacity_per_seq(self) -> int:
        return self.max_pages_per_seq * self.page_size

    @property
    def free_pages(self) -> int:
        return len(self._free)

    def active_slots(self) -> list[int]:
        return [s for s, p in enumerate(self._pages) if p is not None]

    def seqlen(self, slot: int) -> int:
        self._check_active(slot)
        return self._lens[slot]

    def pages(self, slot: int) -> list[int]:
        self._check_active(slot)
        return list(self._pages[slot])

    def memory_stats(self) -> dict:
        """Tokens (and bytes, all layers, K and V) reserved in pages vs used by sequences."""
        active = self.active_slots()
        reserved = sum(len(self._pages[s]) for s in active) * self.page_size
        used = sum(self._lens[s] for s in active)
        k = self.k_cache[0]
        per_token = 2 * len(self.k_cache) * k.shape[2] * k.shape[3] * k.element_size()
        return dict(reserved_tokens=reserved, used_tokens=used,
                    reserved_bytes=reserved * per_token, used_bytes=used * per_token,
                    pool_bytes=self.num_pages * self.page_size * per_token)

    # ------------------------------------------------------------------ changes

    def allocate(self, length: int = 0, slot: int | None = None) -> int:
        """Start a sequence in a free slot (or ``slot``) with room for ``length`` tokens
        (its length stays 0 until ``advance``). Returns the slot."""
        if slot is None:
            free_slots = [s for s, p in enumerate(self._pages) if p is None]
            if not free_slots:
                raise ValueError(f"all {self.max_batch} slots are in use; free one first")
            slot = free_slots[0]
        elif not (0 <= slot < self.max_batch):
            raise ValueError(f"slot must be in [0, {self.max_batch}), got {slot}")
        elif self._pages[slot] is not None:
            raise ValueError(f"slot {slot} is already in use")
        self._pages[slot] = []
        self._lens[slot] = 0
        self._write_len(slot)
        try:
            self.reserve([slot], length)
        except (OutOfPages, ValueError):
            self._pages[slot] = None
            raise
        return slot

    def reserve(self, slots, n_new: int) -> None:
        """Grow: make sure each slot has pages for its length + ``n_new`` tokens. All or
        nothing: if the pool or a page-table row would overflow, nothing changes."""
        slots = [slots] if isinstance(slots, int) else list(slots)
        if n_new < 0:
            raise ValueError(f"n_new must be >= 0, got {n_new}")
        need = {}
        for s in slots:
            self._check_active(s)
            tokens = self._lens[s] + n_new
            if tokens > self.capacity_per_seq:
                raise ValueError(
                    f"slot {s}: {tokens} tokens exceed the per-sequence capacity "
                    f"{self.capacity_per_seq} ({self.max_pages_per_seq} pages of {self.page_size})"
                )
            need[s] = max(0, -(-tokens // self.page_size) - len(self._pages[s]))
        total = sum(need.values())
        if total > len(self._free):
            raise OutOfPages(f"need {total} more pages, {len(self._free)} free of {self.num_pages}")
        for s, n in need.items():
            if n:
                start = len(self._pages[s])
                new = [self._free.pop() for _ in range(n)]
                self._pages[s].extend(new)
                self.page_table[s, start : start + n] = torch.tensor(new, dtype=torch.int32)
        self._maybe_check()

    def advance(self, slots, n: int) -> None:
        """Record that ``n`` tokens were appended to each slot (after the kernel wrote
        them at the old length). The pages must have been reserved."""
        slots = [slots] if isinstance(slots, int) else list(slots)
        for s in slots:
            self._check_active(s)
            if n < 0 or self._lens[s] + n > len(self._pages[s]) * self.page_size:
                raise ValueError(
                    f"slot {s}: advancing {self._lens[s]} by {n} passes its reserved "
                    f"{len(self._pages[s]) * self.page_size} tokens; call reserve first"
                )
        for s in slots:
            self._lens[s] += n
        if slots:
            idx = torch.tensor(slots, dtype=torch.long)
            vals = torch.tensor([self._lens[s] for s in slots], dtype=torch.int32)
            dev = self.cache_seqlens.device
            self.cache_seqlens[idx.to(dev)] = vals.to(dev)
        self._maybe_check()

    def free(self, slot: int) -> None:
        """End a sequence: its pages go back to the pool (reused lowest id first)."""
        self._check_active(slot)
        self._free.extend(self._pages[slot])
        self._free.sort(reverse=True)
        self._pages[slot] = None
        self._lens[slot] = 0
        self.page_table[slot].zero_()
        self._write_len(slot)
        self._maybe_check()

    # ------------------------------------------------------------------ batch views

    def batch(self, slots) -> tuple[torch.Tensor, torch.Tensor]:
        """(cache_seqlens, page_table) for ``slots`` in that order: views when slots are
        0..B-1, gathered copies otherwise."""
        slots = list(slots)
        for s in slots:
            self._check_active(s)
        if slots == list(range(len(slots))):
            return self.cache_seqlens[: len(slots)], self.page_table[: len(slots)]
        idx = torch.tensor(slots, dtype=torch.long, device=self.page_table.device)
        return self.cache_seqlens[idx], self.page_table[idx]

    # ------------------------------------------------------------------ checks

    def _check_active(self, slot: int) -> None:
        if not isinstance(slot, int) or not (0 <= slot < self.max_batch):
            raise ValueError(f"slot must be an int in [0, {self.max_batch}), got {slot!r}")
        if self._pages[slot] is None:
            raise ValueError(f"slot {slot} holds no sequence (allocate it first)")

    def _write_len(self, slot: int) -> None:
        self.cache_seqlens[slot] = self._lens[slot]

    def _maybe_check(self) -> None:
        if self.debug:
            self.check()

    def check(self) -> None:
        """Compare the device page table and lengths with the host state and check the
        invariants (synchronises). Raises ValueError on any mismatch."""
        table = self.page_table.cpu()
        lens = self.cache_seqlens.cpu()
        owned = [p for s in self.active_slots() for p in self._pages[s]]
        if len(set(owned)) != len(owned) or set(owned) & set(self._free):
            raise ValueError("a page is owned twice or both owned and free")
        if len(owned) + len(self._free) != self.num_pages:
            raise ValueError("pages leaked: owned + free != num_pages")
        for s in range(self.max_batch):
            pages = self._pages[s] or []
            if table[s, : len(pages)].tolist() != pages:
                raise ValueError(f"device page_table[{s}] differs from the host state")
            if int(lens[s]) != self._lens[s]:
                raise ValueError(
                    f"device cache_seqlens[{s}] = {int(lens[s])}, host {self._lens[s]}"
                )
            if self._lens[s] > len(pages) * self.page_size:
                raise ValueError(f"slot {s}: length {self._lens[s]} beyond its pages")
