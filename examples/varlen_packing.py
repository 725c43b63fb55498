"""A batch of sequences of different lengths, packed with no padding, forward and
backward: ``flashtile.flash_attn_varlen_func`` against each sequence run on its own.

    python examples/varlen_packing.py             # a GPU if there is one
    python examples/varlen_packing.py --batch 4   # CPU: Triton's interpreter, short sequences

The sequences sit end to end in one (total_tokens, nheads, headdim) tensor and
``cu_seqlens`` says where each starts; one empty sequence is included. Checks the
packed call's output and gradients against the dense call on each sequence (the DESIGN.md
tolerance rule, from an fp64 reference) and prints the attention FLOPs that padding the
batch to its longest sequence would have spent. Exits 1 on a miss.
"""

import argparse
import itertools
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before flashtile imports triton

import flashtile  # noqa: E402
from flashtile import reference  # noqa: E402
from flashtile.validate import check_close  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=None, help="sequences (16 GPU, 4 CPU)")
    p.add_argument("--max-len", type=int, default=None, help="longest sequence (4096 GPU, 48 CPU)")
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = device == "cuda"
    dtype = torch.bfloat16 if gpu else torch.float16
    batch, max_len = a.batch or (16 if gpu else 4), a.max_len or (4096 if gpu else 48)
    heads, heads_kv, head_dim = 8, 2, 64
    torch.manual_seed(0)

    lens = torch.randint(1, max_len + 1, (batch,)).tolist()
    lens[0], lens[-1] = max_len, 0  # the longest possible, and an empty one
    cu = torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=device)
    total = sum(lens)
    q = torch.randn(total, heads, head_dim, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(total, heads_kv, head_dim, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(total, heads_kv, head_dim, device=device, dtype=dtype, requires_grad=True)

    out = flashtile.flash_attn_varlen_func(q, k, v, cu, cu, max_len, max_len, causal=True)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)

    def ref(upcast):  # each sequence alone, in plain PyTorch: out, dq, dk, dv
        xs = [(x.detach().double() if upcast else x.detach()).requires_grad_() for x in (q, k, v)]
        o = reference.flash_attn_varlen_func(*xs, cu, cu, max_len, max_len, causal=True,
                                             upcast=upcast)
        return (o, *torch.autograd.grad(o, xs, dout.to(o.dtype)))

    ok = True
    for name, x, r64, rlp in zip(("out", "dq", "dk", "dv"), (out, *grads), ref(True), ref(False)):
        c = check_close(name, x, r64, rlp)
        ok &= c.ok
        print(f"{name:>3}: max error {c.err:.2e}, bound {c.bound:.2e}  {'ok' if c.ok else 'FAIL'}")
    work = sum(n * n for n in lens)
    print(f"{batch} sequences, lengths {min(lens)}-{max(lens)}, {total} tokens packed; padding "
          f"to {max_len} would compute {batch * max_len * max_len / work:.1f}x the score tiles")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
