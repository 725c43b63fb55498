"""How many bar.sync does Triton 3.6's barrier pass (membar) put in a TMA ring's step loop?
Compiles small Gluon kernels for sm_90 on the CPU (no GPU) and counts bar.sync per step.

Each step waits on its slot's mbarrier, reads the slot, then refills a slot (mbarrier
expect + TMA copy). Variants:

  ring        one [S, ...] allocation indexed by i % S (the shipped kernels' rings)
  ring-static the same allocation, loop unrolled by S, slots named by constants
  slots       one allocation per slot, unrolled by S: refill the slot just read
  slots-late  one allocation per slot, unrolled by S: arm the slot just read, copy into
              the slot read one step earlier (one step less of TMA lead)
  slots-guard slots-late with each unrolled step under `if i < n` (a loop whose length
              is not a multiple of S)

Session 14 (printed per step): ring 3, ring-static 3 (the pass does not tell constant
slots of one allocation apart), slots 2, slots-late 1, slots-guard 2 (each guard opens
a path on which the skipped steps' hazards meet, and the pass syncs at each block).

    python scripts/membar_probe.py
"""

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

S = 3
VARIANTS = ("ring", "ring-static", "slots", "slots-late", "slots-guard")


@gluon.jit
def _consume(smem, bar, phase, acc, layout: gl.constexpr):
    mbarrier.wait(bar, phase)
    return acc + smem.load(layout).to(gl.float32)


@gluon.jit
def _refill(desc, smem, bar, row, pred=True):
    mbarrier.expect(bar, desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [row, 0], bar, smem, pred=pred)


@gluon.jit
def _probe(desc, OUT, n, VARIANT: gl.constexpr, S: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    acc = gl.zeros([64, 64], gl.float32, layout)
    nbytes: gl.constexpr = desc.block_type.nbytes
    if VARIANT < 2:  # one ring allocation
        ring = gl.allocate_shared_memory(desc.dtype, [S] + desc.block_type.shape, desc.layout)
        bars = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
        for u in gl.static_range(S):
            mbarrier.init(bars.index(u), count=1)
        fence_async_shared()
        gl.thread_barrier()
        for u in gl.static_range(S):
            _refill(desc, ring.index(u), bars.index(u), u * 64)
        if VARIANT == 0:
            for i in range(0, n):
                s = i % S
                acc = _consume(ring.index(s), bars.index(s), (i // S) & 1, acc, layout)
                gl.thread_barrier()
                _refill(desc, ring.index(s), bars.index(s), (i + S) * 64)
        else:
            for i in range(0, n, S):
                for u in gl.static_range(S):
                    acc = _consume(ring.index(u), bars.index(u), (i // S) & 1, acc, layout)
                    gl.thread_barrier()
                    _refill(desc, ring.index(u), bars.index(u), (i + u + S) * 64)
    else:  # one allocation per slot (tuples indexed by constants)
        smems = ()
        bars = ()
        for _u in gl.static_range(S):
            smems = smems + (gl.allocate_shared_memory(desc.dtype, desc.block_type.shape,
                                                       desc.layout),)
            bars = bars + (gl.allocate_shared_memory(gl.int64, [1],
                                                     mbarrier.MBarrierLayout()),)
        for u in gl.static_range(S):
            mbarrier.init(bars[u], count=1)
        fence_async_shared()
        gl.thread_barrier()
        for u in gl.static_range(S):
            _refill(desc, smems[u], bars[u], u * 64)
        for i in range(0, n, S):
            for u in gl.static_range(S):
                if VARIANT == 2:
                    acc = _consume(smems[u], bars[u], (i // S) & 1, acc, layout)
                    gl.thread_barrier()
                    _refill(desc, smems[u], bars[u], (i + u + S) * 64)
                elif VARIANT == 3:
                    acc = _consume(smems[u], bars[u], (i // S) & 1, acc, layout)
                    gl.thread_barrier()
                    tma.async_copy_global_to_shared(desc, [(i + u - 1 + S) * 64, 0],
                                                    bars[(u + S - 1) % S], smems[(u + S - 1) % S])
                    mbarrier.expect(bars[u], nbytes)
                else:
                    if i + u < n:
                        acc = _consume(smems[u], bars[u], (i // S) & 1, acc, layout)
                        gl.thread_barrier()
                        tma.async_copy_global_to_shared(
                            desc, [(i + u - 1 + S) * 64, 0], bars[(u + S - 1) % S],
                            smems[(u + S - 1) % S])
                        mbarrier.expect(bars[u], nbytes)
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, layout))
    gl.store(OUT + rows[:, None] * 64 + cols[None, :], acc)


def bar_syncs_per_step(variant: str) -> float:
    lay = gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16)
    sig = {"desc": f"tensordesc<bf16[64,64],{lay!r}>", "OUT": "*fp32", "n": "i32",
           "VARIANT": "constexpr", "S": "constexpr"}
    src = GluonASTSource(fn=_probe, signature=sig,
                         constexprs={"VARIANT": VARIANTS.index(variant), "S": S})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                         options=dict(num_warps=4)).asm["ptx"]
    loop = ptx[ptx.index("Loop Header"):]
    loop = loop[:loop.index("_crit_edge")]
    return loop.count("bar.sync") / (1 if variant == "ring" else S)


if __name__ == "__main__":
    for name in VARIANTS:
        print(f"{name:<12} {bar_syncs_per_step(name):.2f} bar.sync per step")
