"""A toy serving loop on a paged KV cache: prefill, batched decode, a request that
finishes and one that takes its pages.

    python examples/paged_decode.py               # a GPU if there is one
    python examples/paged_decode.py --steps 4     # CPU: Triton's interpreter, small shapes

No model: random queries and keys stand in for one attention layer's projections.
``flashtile.PagedKVCache`` owns the pages, the page table and the lengths (and checks
them on the host); ``flashtile.flash_attn_with_kvcache`` appends each call's new keys
and values into the pages and attends over them. Every output is checked against plain
attention over a copy of each request's history kept beside the cache, and the cache's
pages against that history, bit for bit. Exits 1 on a miss.
"""

import argparse
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before flashtile imports triton

import flashtile  # noqa: E402
from flashtile import reference  # noqa: E402
from flashtile.validate import check_close  # noqa: E402

H, HKV, D = 8, 2, 64  # query heads, K/V heads (GQA 4:1), head dim


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=None, help="decode steps (default 32 GPU, 6 CPU)")
    p.add_argument("--page-size", type=int, default=16)
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    gpu = device == "cuda"
    prompts = [700, 90, 3000] if gpu else [37, 5, 20]
    late_prompt = 1200 if gpu else 24  # arrives when the second request finishes
    steps = a.steps or (32 if gpu else 6)
    torch.manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, device=device, dtype=dtype)

    cache = flashtile.PagedKVCache(num_pages=512, page_size=a.page_size, nheads_kv=HKV,
                                   head_dim=D, max_batch=4, dtype=dtype, device=device)
    history = {}  # slot -> (keys, values) as plain tensors, for the checks
    worst = 0.0

    def attend(slots, q, k, v):
        """One call for ``slots``: append k / v at each slot's length, attend, check."""
        nonlocal worst
        lens, table = cache.batch(slots)
        out = flashtile.flash_attn_with_kvcache(q, cache.k_cache[0], cache.v_cache[0], k, v,
                                                cache_seqlens=lens, page_table=table,
                                                causal=True)
        cache.advance(slots, q.shape[1])
        for i, s in enumerate(slots):
            hk, hv = history.get(s, (k[i, :0], v[i, :0]))
            history[s] = hk, hv = torch.cat([hk, k[i]]), torch.cat([hv, v[i]])
            args = [x[None] for x in (q[i], hk, hv)]
            r64 = reference.flash_attn_func(*(x.double() for x in args), causal=True)
            rlp = reference.flash_attn_func(*args, causal=True, upcast=False)
            c = check_close(f"slot {s}", out[i : i + 1], r64, rlp)
            worst = max(worst, c.ratio)
            if not c.ok:
                raise SystemExit(f"{c.name}: error {c.err:.2e} over bound {c.bound:.2e}")
        return out

    def prefill(length):
        slot = cache.allocate(length)
        attend([slot], rand(1, length, H, D), rand(1, length, HKV, D), rand(1, length, HKV, D))
        print(f"prefill: slot {slot}, {length} tokens, {len(cache.pages(slot))} pages")
        return slot

    slots = [prefill(n) for n in prompts]
    for step in range(steps):
        if step == steps // 2:  # the second request ends; a new one reuses its pages
            freed = set(cache.pages(slots[1]))
            cache.free(slots[1])
            history.pop(slots[1])
            new = prefill(late_prompt)
            reused = len(freed & set(cache.pages(new)))
            print(f"step {step}: slot {slots[1]} freed {len(freed)} pages, slot {new} took "
                  f"{reused} of them")
            slots[1] = new
        batch = len(slots)
        cache.reserve(slots, 1)  # a new page wherever a sequence crosses a page boundary
        attend(slots, rand(batch, 1, H, D), rand(batch, 1, HKV, D), rand(batch, 1, HKV, D))

    for s in slots:  # the appended keys and values sit in the pages, bit for bit
        pages = torch.tensor(cache.pages(s), device=device)
        n = cache.seqlen(s)
        for pool, hist in zip((cache.k_cache[0], cache.v_cache[0]), history[s]):
            if not torch.equal(pool[pages].flatten(0, 1)[:n], hist):
                raise SystemExit(f"slot {s}: the cache's pages differ from its history")
    stats = cache.memory_stats()
    longest = max(cache.seqlen(s) for s in slots)
    print(f"{steps} decode steps over {len(slots)} requests, lengths "
          f"{[cache.seqlen(s) for s in slots]}; worst error / bound {worst:.2f}")
    print(f"KV memory: {stats['used_tokens']} tokens used, {stats['reserved_tokens']} reserved "
          f"in pages; a contiguous cache as long as the longest would hold "
          f"{len(slots) * longest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
