"""Context parallelism: ring attention across processes on torch.distributed.

    from flashtile.distributed import ring_flash_attn_func, shard, unshard

    q_l, k_l, v_l = (shard(t, layout="zigzag") for t in (q, k, v))   # (B, L, H, D) each
    out_l = ring_flash_attn_func(q_l, k_l, v_l, causal=True, layout="zigzag", seqlen=S)
    out = unshard(out_l, S, layout="zigzag")                            # (B, S, H, D)

See docs/ring.md for the algorithm, the zig-zag load balancing and memory per rank.
Nothing from Triton is imported until the first call.
"""

from .layout import LAYOUTS, local_positions, padded_length, shard, unshard, valid_local_length
from .module import ContextParallelMiniGPT, RingAttention, RingCausalSelfAttention
from .ring import RingFlashAttnFunction, ring_flash_attn_func

__all__ = [
    "LAYOUTS", "ContextParallelMiniGPT", "RingAttention", "RingCausalSelfAttention",
    "RingFlashAttnFunction", "local_positions", "padded_length", "ring_flash_attn_func",
    "shard", "unshard", "valid_local_length",
]
