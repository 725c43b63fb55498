"""Where the backward reading dropout bits departs from the one drawing (GPU diagnostic).

tests/test_flash.py::test_dropout_bits_drop_the_same compares the two bitwise; on the
H200 (s17a) dq differed for causal calls with an explicit BwdConfig. This prints, per
config, how many elements of dq / dk / dv differ, by how much, and in which query rows
and keys, and whether the keep decisions the dQ kernel's tiles would read (the words)
equal the drawn mask where the causal mask keeps an element.

    python scripts/diag_bits.py
"""

from __future__ import annotations

import torch

from flashtile import configs
from flashtile.ops import flash
from flashtile.validate import make_qkv


def main() -> int:
    dev = torch.device("cuda")
    b, sq, sk, h, hk, d, p = 2, 70, 45, 4, 2, 32, 0.3
    q, k, v = make_qkv(b, sq, sk, h, hk, d, torch.float16, dev)
    dout = torch.randn_like(q)
    cfgs = {"default": None}
    for bm in (16, 64):
        cfgs[f"bm{bm}"] = configs.BwdConfig(block_m=bm, block_n=32,
                                            num_warps=1 if bm < 64 else 4, num_stages=1)
    for causal in (False, True):
        for name, cfg in cfgs.items():
            buf = flash.dropout_bits_buffer((1234, 567), b, h, sq, sk, dev)
            words = (buf[flash.DROPOUT_BITS_HEADER:], 0)
            res = []
            for fwd_rng, bwd_rng in (((1234, 567), (1234, 567)), ((buf, 0), words)):
                out, lse = flash.attention_forward(q, k, v, causal=causal, dropout_p=p,
                                                   rng_state=fwd_rng)
                res.append((out, *flash.attention_backward(
                    dout, q, k, v, out, lse, causal=causal, dropout_p=p, rng_state=bwd_rng,
                    config=cfg)))
            line = [f"causal={int(causal)} {name:8}"]
            for tag, x, y in zip(("out", "dq", "dk", "dv"), *res):
                diff = (x.float() - y.float()).abs()
                n = int((diff > 0).sum())
                line.append(f"{tag}: {n:5d} differ, max {diff.max().item():.2e}")
                if n and tag != "out":
                    idx = (diff > 0).nonzero()
                    line.append(f"[{tag} rows/keys {idx[:, 1].min().item()}.."
                                f"{idx[:, 1].max().item()}, heads "
                                f"{sorted(set(idx[:, 2].tolist()))}]")
            print("  ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
