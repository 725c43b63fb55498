"""The last wave's key tiles in pieces (ops/tail_split.py, HopperBwdConfig.tail_split).

CPU (every CI run): the plan's choices against its own scheduling model; the kernel's
program -> (key tile, head, query tiles) map, transcribed, covers every (key tile, query
tile) pair of every head exactly once and puts each piece in the workspace row the
combine reads; the combine (Triton, the interpreter here) against its torch twin; the
launcher's host side with the dK/dV launch captured. GPU runs are in
tests/test_hopper_bwd_reduce.py (test_tail_split_*)."""

import dataclasses

import pytest
import torch

from flashtile import configs
from flashtile.ops import hopper_bwd, tail_split


@pytest.mark.parametrize("steps", [2, 3, 5, 64, 257])
def test_piece_bounds_partition(steps):
    """Each split's pieces are contiguous, non-empty, in order, and cover [0, steps)."""
    for split in range(1, min(steps, 9) + 1):
        bounds = [tail_split.piece_bounds(p, split, steps) for p in range(split)]
        assert bounds[0][0] == 0 and bounds[-1][1] == steps
        assert all(lo < hi for lo, hi in bounds), bounds
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:])), bounds


def _modelled(programs, slots, steps, r, s):
    """ops/tail_split.plan's objective for (r, s)."""
    full = tail_split.FIXED_STEPS + steps
    if r == 0:
        return tail_split._makespan(programs, full, [], slots)
    sizes = [hi - lo for lo, hi in (tail_split.piece_bounds(p, s, steps) for p in range(s))]
    pieces = [tail_split.FIXED_STEPS + tail_split.PIECE_STEPS + n for n in sizes] * r
    return (tail_split._makespan(programs - r, full, pieces, slots) + tail_split.COMBINE_STEPS
            + tail_split.COMBINE_STEPS_PER_PIECE * r * s)


@pytest.mark.parametrize("programs,slots,steps", [(2048, 132, 64), (2048, 132, 256),
                                                  (4096, 132, 64), (1980, 132, 64),
                                                  (64, 132, 64), (2048, 132, 1),
                                                  (36, 17, 17), (16, 7, 2)])
def test_plan_against_its_model(programs, slots, steps):
    """A split only where the model saves MIN_GAIN, never more pieces than query tiles or
    the config's bound, R the last partial wave (or one wave more), and no (r, s) in the
    plan's search space modelled faster. No split without a partial wave."""
    r, s = tail_split.plan(programs, slots, steps, 8)
    base = _modelled(programs, slots, steps, 0, 1)
    tail = programs % slots
    if r == 0:
        assert s == 1
    else:
        assert 2 <= s <= min(8, steps) and r in (tail, tail + slots) and r <= programs
        assert _modelled(programs, slots, steps, r, s) <= base * (1 - tail_split.MIN_GAIN)
    best = _modelled(programs, slots, steps, r, s)
    for rr in (tail, tail + slots):
        for ss in range(2, min(8, steps) + 1):
            if 0 < rr <= programs:
                assert best <= _modelled(programs, slots, steps, rr, ss) + 1e-9, (rr, ss)
    if tail == 0 and programs >= slots:
        assert (r, s) == (0, 1)


def test_plan_issue4_shapes():
    """At the DESIGN.md hd 128 shapes (2048 programs of 64 / 256 query tiles on 132 SMs):
    the 68-program last wave split, and the model's saving there (1.1% / 2.1%)."""
    for steps, want in ((64, 0.010), (256, 0.020)):
        r, s = tail_split.plan(2048, 132, steps, 8)
        assert r == 68 and s >= 3, (steps, r, s)
        gain = 1 - _modelled(2048, 132, steps, r, s) / _modelled(2048, 132, steps, 0, 1)
        assert gain >= want, (steps, gain)


def _kernel_map(lin, n_full, split, n_kt, n_m):
    """ops/hopper_bwd._key_tile_coords with TAIL, transcribed: (pid_n, program head, first
    query tile, query tiles, workspace slot or -1)."""
    over = max(lin - n_full, 0)
    t = min(lin, n_full) + over // split
    piece = over % split
    ways = split if lin >= n_full else 1
    lo = piece * n_m // ways
    return t % n_kt, t // n_kt, lo, (piece + 1) * n_m // ways - lo, lin - n_full


@pytest.mark.parametrize("n_kt,heads,n_m,slots", [(32, 64, 64, 132), (9, 4, 17, 7),
                                                  (128, 16, 256, 132), (3, 5, 2, 4)])
def test_kernel_map_covers_once(n_kt, heads, n_m, slots):
    """Every (head, key tile, query tile) visited exactly once; the pieces of a tile are
    consecutive programs writing consecutive workspace rows, the rows combine reads for
    that tile (tile n_full + r's piece s at row r * split + s)."""
    programs = n_kt * heads
    r, split = tail_split.plan(programs, slots, n_m, 8)
    if r == 0:
        r, split = min(programs, 3), 2  # the map must hold for any split
    n_full = programs - r
    seen = {}
    for lin in range(n_full + r * split):
        pid_n, head, lo, cnt, slot = _kernel_map(lin, n_full, split, n_kt, n_m)
        assert cnt >= 1 and 0 <= lo and lo + cnt <= n_m
        t = head * n_kt + pid_n
        if slot >= 0:
            assert t >= n_full and slot // split == t - n_full
        else:
            assert t < n_full and (lo, cnt) == (0, n_m)
        for m in range(lo, lo + cnt):
            key = (head, pid_n, m)
            assert key not in seen, key
            seen[key] = lin
    assert len(seen) == programs * n_m


@pytest.mark.parametrize("seqlen_k,key_heads,batch,split,n_tiles", [(1100, 2, 2, 3, 5),
                                                                   (256, 3, 1, 2, 6),
                                                                   (70, 1, 3, 4, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_combine_matches_reference(seqlen_k, key_heads, batch, split, n_tiles, dtype, device):
    """The combine kernel (the interpreter on the CPU) writes what its torch twin does: the
    last tiles' rows (a ragged last tile clipped), each the sum of its pieces in order,
    cast once (fp32 outputs: bitwise; bf16 within one unit, as the interpreter's cast
    rounds otherwise than torch's); every other element untouched (NaN)."""
    block_n, d = 128, 64
    n_kt = -(-seqlen_k // block_n)
    n_full = n_kt * batch * key_heads - n_tiles
    part = torch.randn(n_tiles * split, 2, block_n, d, device=device)
    got = [torch.full((batch, seqlen_k, key_heads, d), float("nan"), dtype=dtype,
                      device=device) for _ in range(2)]
    want = [g.clone() for g in got]
    tail_split.combine(part, split, n_full, n_kt, key_heads, *got, block_n)
    tail_split.combine_reference(part, split, n_full, n_kt, key_heads, *want, block_n)
    for g, w in zip(got, want):
        assert torch.equal(g.isnan(), w.isnan())
        if dtype == torch.float32:
            assert torch.equal(torch.nan_to_num(g), torch.nan_to_num(w))
        else:
            torch.testing.assert_close(torch.nan_to_num(g).float(),
                                       torch.nan_to_num(w).float(), rtol=2**-7, atol=0)
    written = (~got[0].isnan()).any(-1).sum().item()  # (row, head) pairs written
    assert 0 < written <= n_tiles * block_n


@pytest.mark.parametrize("expand", [False, True])
def test_tail_launcher_plumbing(monkeypatch, expand):
    """The launcher with tail_split (CPU tensors, the dK/dV launch captured and its
    writes emulated: random partials, the other tiles' dK / dV): a 1D grid of the full
    programs plus the pieces, TAIL / n_full / the workspace passed, and the combine's sums
    in the split tiles; causal calls and windows launch unsplit; with the ordered adds,
    dq_rotate or tile-major it raises before launch."""
    launched = []

    def fake_launch(kernel, grid, device, *args, **kw):
        launched.append((kernel.fn.__name__, grid, kw))
        if kernel.fn.__name__ == "_bwd_dkdv_kernel":
            kw["DQ_REDUCE"] and kw["dq_desc"].base.zero_()
            if "PART" in kw:
                kw["PART"].copy_(torch.randn(kw["PART"].shape))

    monkeypatch.setattr(hopper_bwd, "launch", fake_launch)
    b, m, n, h, hkv, d = 2, 700, 1000, 4, 2, 64
    q = torch.randn(b, m, h, d, dtype=torch.bfloat16)
    k, v = (torch.randn(b, n, hkv, d, dtype=torch.bfloat16) for _ in range(2))
    out, dout, lse = torch.randn_like(q), torch.randn_like(q), torch.randn(b, h, m)
    base = dataclasses.replace(configs.hopper_bwd_reduce_config(d, False, n, h // hkv,
                                                                fixed=True),
                               gqa_expand=expand)
    n_kt, heads = -(-n // base.block_n), b * (h if expand else hkv)
    slots = next(s for s in range(5, 40)  # a few SMs that make the plan split
                 if tail_split.plan(n_kt * heads, s, -(-m // base.block_m), 4)[0])
    cfg = dataclasses.replace(base, tail_split=4, tail_slots=slots)
    r, split = tail_split.plan(n_kt * heads, slots, -(-m // base.block_m), 4)

    def run(cfg, causal=False, **kw):
        launched.clear()
        grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
        hopper_bwd.hopper_attention_backward(dout, q, k, v, out, lse, None, causal, *grads,
                                             config=cfg, **kw)
        return grads, next((g, kw) for name, g, kw in launched if name == "_bwd_dkdv_kernel")

    captured = {}
    real_combine = tail_split.combine

    def spy_combine(part, *args):
        captured["part"] = part.clone()
        real_combine(part, *args)

    monkeypatch.setattr(tail_split, "combine", spy_combine)
    grads, (grid, kw) = run(cfg)
    assert grid == (n_kt * heads - r + r * split,), grid
    assert (kw["TAIL"], kw["n_full"]) == (split, n_kt * heads - r)
    assert kw["PART"].shape == (r * split, 2, base.block_n, d)
    if not expand:  # the combine's rows, as its twin writes them
        want = [torch.full_like(t, float("nan")) for t in (k, v)]
        tail_split.combine_reference(captured["part"], split, n_kt * heads - r, n_kt, hkv,
                                     *want, base.block_n)
        written = ~want[0].isnan()
        assert written.any()
        for g, w in zip(grads[1:], want):  # (the interpreter's bf16 cast: one unit)
            torch.testing.assert_close(g[written].float(), w[written].float(), rtol=2**-7,
                                       atol=0)
    for causal, extra in ((True, {}), (False, dict(left=64))):
        _, (grid, kw) = run(cfg, causal=causal, **extra)
        assert len(grid) == 2 and "TAIL" not in kw, (causal, extra)
    for bad in (dict(dq_rotate=True), dict(tile_major=True)):
        with pytest.raises(ValueError, match="tail_split"):
            run(dataclasses.replace(cfg, **bad))
    ordered = dataclasses.replace(configs.hopper_bwd_reduce_config(d, False, n, h // hkv,
                                                                   ordered=True),
                                  tail_split=4, tail_slots=slots)
    with pytest.raises(ValueError, match="tail_split"):
        run(ordered)
