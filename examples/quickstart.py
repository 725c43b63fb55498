"""flashtile in one screen: forward and backward, checked against an fp64 reference.

    python examples/quickstart.py                 # a GPU if there is one
    python examples/quickstart.py --seqlen 64     # CPU: Triton's interpreter, small shapes

Runs causal attention with grouped-query heads (8 query heads, 2 K/V heads), a sliding
window and a softcap, takes gradients, and checks every tensor with the rule the test
suite uses (DESIGN.md: the kernel's error against fp64 at most twice that of PyTorch's
own attention in the input dtype, plus the output dtype's rounding). Exits 1 on a miss.
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seqlen", type=int, default=None, help="default 2048 on a GPU, 64 on CPU")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--window", type=int, default=None,
                   help="keys to the left of each query (default seqlen / 4)")
    p.add_argument("--softcap", type=float, default=30.0)
    a = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    seqlen = a.seqlen or (2048 if device == "cuda" else 64)

    torch.manual_seed(0)
    shape_q, shape_kv = (a.batch, seqlen, 8, a.head_dim), (a.batch, seqlen, 2, a.head_dim)
    q = torch.randn(shape_q, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(shape_kv, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(shape_kv, device=device, dtype=dtype, requires_grad=True)
    window = a.window if a.window is not None else seqlen // 4
    opts = dict(causal=True, window_size=(window, 0), softcap=a.softcap)

    out = flashtile.flash_attn_func(q, k, v, **opts)         # (batch, seqlen, nheads, headdim)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)

    def ref(upcast):  # the same call in plain PyTorch: fp64, or the inputs' dtype
        xs = [x.detach().double() if upcast else x.detach() for x in (q, k, v)]
        xs = [x.requires_grad_() for x in xs]
        o = reference.flash_attn_func(*xs, upcast=upcast, **opts)
        return (o, *torch.autograd.grad(o, xs, dout.to(o.dtype)))

    ok = True
    for name, x, r64, rlp in zip(("out", "dq", "dk", "dv"), (out, *grads), ref(True), ref(False)):
        c = check_close(name, x, r64, rlp)
        ok &= c.ok
        print(f"{name:>3}: max error {c.err:.2e}, bound {c.bound:.2e}  {'ok' if c.ok else 'FAIL'}")
    print(f"{device}, {dtype}, q {tuple(q.shape)}, k/v {tuple(k.shape)}, {opts}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
