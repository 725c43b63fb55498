"""The correctness harness: DESIGN.md's tolerance rule, adversarial inputs, a case grid.

Tolerance (for each of out, lse, dq, dk, dv), with ``ref64`` the float64 reference and
``ref_lp`` the same reference in the precision the path promises::

    max|x - ref64| <= 2 * max|ref_lp - ref64| + floor,   floor = max|ref64.to(x.dtype) - ref64|

maxima over the entries where ref64 is finite; where it is not (lse of a fully masked
row), x must equal it exactly. Used by the tests, the ladder and ``flashtile validate``.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field, replace

import torch

from . import reference


@dataclass
class Check:
    """One tolerance check: ``ok`` iff err <= bound (and non-finite entries match)."""

    name: str
    err: float
    bound: float
    nonfinite_ok: bool = True

    @property
    def ratio(self) -> float:
        if self.bound > 0:
            return self.err / self.bound
        return 0.0 if self.err == 0 else math.inf

    @property
    def ok(self) -> bool:
        return self.nonfinite_ok and self.err <= self.bound and not math.isnan(self.err)

    def __str__(self) -> str:
        flag = "ok" if self.ok else "FAIL"
        extra = "" if self.nonfinite_ok else " (non-finite entries differ)"
        return (
            f"{self.name}: err={self.err:.3e} bound={self.bound:.3e} "
            f"ratio={self.ratio:.2f} {flag}{extra}"
        )


def check_close(
    name: str, x: torch.Tensor, ref64: torch.Tensor, ref_lp: torch.Tensor, atol: float = 0.0
) -> Check:
    """Apply the DESIGN.md rule to ``x`` against ``ref64`` with baseline ``ref_lp``.

    ``atol`` is added to the bound; ``run_case`` passes the fp32 accumulator's
    resolution over a head_dim-long dot at the problem's scale (2^-22 * head_dim * the
    largest reference magnitude),
    which matters only where the true value is exactly representable and PyTorch hits
    it exactly: the zero dq/dk of a one-key softmax, say. It is far below any real bug.
    """
    x64 = x.detach().to(torch.float64).cpu()
    r64 = ref64.detach().to(torch.float64).cpu()
    lp64 = ref_lp.detach().to(torch.float64).cpu()
    finite = torch.isfinite(r64)
    nonfinite_ok = bool(torch.equal(x64[~finite], r64[~finite])) if (~finite).any() else True
    if not finite.any():
        return Check(name, 0.0, 0.0, nonfinite_ok)
    diff = (x64 - r64)[finite].abs()
    err = float(diff.max()) if not torch.isnan(diff).any() else math.nan
    lp_err = float((lp64 - r64)[finite].abs().max())
    floor = float((r64.to(x.dtype).to(torch.float64) - r64)[finite].abs().max())
    return Check(name, err, 2.0 * lp_err + floor + atol, nonfinite_ok)


# ----------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------

INPUT_KINDS = ("randn", "wide_logits", "late_spike")


def seed_from(text: str) -> int:
    """A stable 31-bit seed from a test id or case name (printed on failure)."""
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


def make_qkv(
    batch,
    seqlen_q,
    seqlen_k,
    nheads,
    nheads_kv,
    head_dim,
    dtype,
    device,
    kind="randn",
    layout="contiguous",
    seed=0,
    softmax_scale=None,
):
    """Random q, k, v in flashtile layout, never zeros.

    kind: ``randn``; ``wide_logits`` (scores spread over about +-30); ``late_spike``
    (scores rise with the key index, so each row's maximum sits in its last visible key
    tile: a missing online-softmax rescale shows up as a large error).
    layout: ``contiguous``; ``strided`` (views of a (B, H, S, D) tensor with a padded
    head dim, so no stride but the last is packed).
    """
    gen = torch.Generator().manual_seed(seed)
    scale = softmax_scale or 1.0 / math.sqrt(head_dim)

    def draw(s, h):
        if layout == "strided":
            t = torch.randn(batch, h, s, head_dim + 8, generator=gen, dtype=torch.float32)
            return t, lambda x: x.to(device=device, dtype=dtype)[..., :head_dim].transpose(1, 2)
        t = torch.randn(batch, s, h, head_dim, generator=gen, dtype=torch.float32)
        return t.transpose(1, 2), lambda x: x.transpose(1, 2).to(device=device, dtype=dtype)

    (q, fq), (k, fk), (v, fv) = (
        draw(seqlen_q, nheads),
        draw(seqlen_k, nheads_kv),
        draw(seqlen_k, nheads_kv),
    )
    # q, k, v here are (B, H, S, D') float32 on the CPU
    if kind == "wide_logits":
        # score std = sigma^2 with q, k ~ N(0, sigma^2): sigma^2 = 10 spreads scores ~+-30
        q = q * math.sqrt(10.0)
        k = k * math.sqrt(10.0)
    elif kind == "late_spike":
        # add 15 * (j + 1) / Sk to every score through the first few channels, with
        # moderate magnitudes on both sides (a huge k would only amplify bf16 noise in dq)
        nch = min(8, head_dim)
        a = math.sqrt(15.0 / (nch * scale))
        ramp = torch.arange(1, seqlen_k + 1, dtype=torch.float32) / max(seqlen_k, 1)
        q[..., :nch] = a
        k[..., :nch] = a * ramp[:, None]
    elif kind != "randn":
        raise ValueError(f"kind must be one of {INPUT_KINDS}, got {kind!r}")
    return fq(q), fk(k), fv(v)


# ----------------------------------------------------------------------------------
# cases
# ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    batch: int = 1
    seqlen_q: int = 64
    seqlen_k: int = 64
    nheads: int = 2
    nheads_kv: int = 2
    head_dim: int = 64
    causal: bool = False
    window_size: tuple = (-1, -1)
    softcap: float = 0.0
    dtype: torch.dtype = torch.float16
    kind: str = "randn"
    layout: str = "contiguous"
    dropout_p: float = 0.0
    backward: bool = True

    @property
    def name(self) -> str:
        dt = str(self.dtype).replace("torch.", "")
        mask = "causal" if self.causal else "full"
        if self.window_size != (-1, -1):
            mask += f"-win{self.window_size[0]}_{self.window_size[1]}"
        if self.softcap:
            mask += f"-cap{self.softcap:g}"
        if self.dropout_p:
            mask += f"-drop{self.dropout_p:g}"
        return (
            f"b{self.batch}-q{self.seqlen_q}-k{self.seqlen_k}-h{self.nheads}x"
            f"{self.nheads_kv}-d{self.head_dim}-{mask}-{dt}-{self.kind}-{self.layout}"
        )


@dataclass
class CaseResult:
    case: Case
    seed: int
    checks: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def summary(self) -> str:
        return f"{self.case.name} (seed {self.seed}): " + "; ".join(str(c) for c in self.checks)


def run_case(case: Case, device, seed: int | None = None, fn=None) -> CaseResult:
    """Run ``fn`` (default ``flashtile.flash_attn_func``) on ``case`` and check out, lse
    and, if ``case.backward``, dq/dk/dv against the float64 and input-precision
    references. With dropout, the kernel's own mask is replayed in the references."""
    from .ops import flash

    fn = fn or flash.flash_attn_func
    seed = seed_from(case.name) if seed is None else seed
    q, k, v = make_qkv(
        case.batch,
        case.seqlen_q,
        case.seqlen_k,
        case.nheads,
        case.nheads_kv,
        case.head_dim,
        case.dtype,
        device,
        case.kind,
        case.layout,
        seed,
    )
    kwargs = dict(
        causal=case.causal,
        window_size=case.window_size,
        softcap=case.softcap,
        dropout_p=case.dropout_p,
    )
    mask = None
    if case.dropout_p > 0:
        torch.manual_seed(seed)
        rng_state = flash.draw_rng_state()
        mask = flash.dropout_mask(
            rng_state, case.batch, case.nheads, case.seqlen_q, case.seqlen_k, case.dropout_p, device
        )
        torch.manual_seed(seed)
    inputs = [t.detach().requires_grad_(case.backward) for t in (q, k, v)]
    out, lse = fn(*inputs, return_lse=True, **kwargs)
    result = CaseResult(case, seed)
    refs = []
    for upcast in (True, False):
        rin = [t.detach().requires_grad_(case.backward) for t in (q, k, v)]
        ro, rl = reference.flash_attn_func(
            *rin, return_lse=True, dropout_mask=mask, upcast=upcast, **kwargs
        )
        refs.append((rin, ro, rl))
    (r64_in, o64, l64), (rlp_in, olp, llp) = refs
    result.checks.append(check_close("out", out, o64, olp))
    result.checks.append(check_close("lse", lse, l64, llp))
    if case.backward:
        gen = torch.Generator().manual_seed(seed + 1)
        dout = torch.randn(out.shape, generator=gen).to(device=device, dtype=out.dtype)
        grads = torch.autograd.grad(out, inputs, dout)
        g64 = torch.autograd.grad(o64, r64_in, dout.to(torch.float64))
        glp = torch.autograd.grad(olp, rlp_in, dout)
        scale = max(float(t.detach().abs().max()) if t.numel() else 0.0 for t in (o64, *g64))
        atol = 2.0**-22 * case.head_dim * scale  # fp32 rounding over a head_dim-long dot
        for name, g, r, lp in zip(("dq", "dk", "dv"), grads, g64, glp):
            result.checks.append(check_close(name, g, r, lp, atol=atol))
    return result


# ----------------------------------------------------------------------------------
# the shape grid
# ----------------------------------------------------------------------------------

HEAD_DIMS = (40, 64, 72, 96, 128, 192, 256)
# (seqlen_q, seqlen_k) classes: single token, odd, q longer, k longer, multi-tile
SEQLEN_CLASSES = ((1, 1), (17, 17), (113, 239), (239, 113), (1023, 1023))
HEAD_RATIOS = ((2, 2), (4, 2), (4, 1))  # MHA, GQA, MQA
MASKS = (
    dict(causal=False),
    dict(causal=True),
    dict(causal=False, window_size=(32, 8)),
    dict(causal=True, window_size=(48, -1)),
    dict(causal=False, softcap=20.0),
)


def covering_grid(axes: dict) -> list[dict]:
    """A greedy pairwise covering set: every pair of values of every two axes appears in
    at least one row. Deterministic (first value wins ties)."""
    names = list(axes)
    uncovered = {
        (a, i, b, j)
        for ai, a in enumerate(names)
        for b in names[ai + 1 :]
        for i in range(len(axes[a]))
        for j in range(len(axes[b]))
    }
    rows = []
    while uncovered:
        row = {}
        for a in names:  # pick each axis' value covering the most open pairs so far
            best, best_gain = 0, -1
            for i in range(len(axes[a])):
                gain = sum(
                    1
                    for (x, xi, y, yi) in uncovered
                    if (x == a and xi == i and y in row and row[y] == yi)
                    or (y == a and yi == i and x in row and row[x] == xi)
                    or (x == a and xi == i and y not in row)
                )
                if gain > best_gain:
                    best, best_gain = i, gain
            row[a] = best
        covered = {(a, row[a], b, row[b]) for ai, a in enumerate(names) for b in names[ai + 1 :]}
        if not covered & uncovered:  # safety: force the first open pair in
            a, i, b, j = next(iter(sorted(uncovered)))
            row[a], row[b] = i, j
            covered = {
                (x, row[x], y, row[y]) for xi, x in enumerate(names) for y in names[xi + 1 :]
            }
        uncovered -= covered
        rows.append({a: axes[a][row[a]] for a in names})
    return rows


def case_grid(full: bool = False, small: bool = False, dtypes=None) -> list[Case]:
    """The DESIGN.md grid: the full product (GPU) or a pairwise covering set (CPU).
    ``small`` shrinks the longest sequences for the interpreter."""
    dtypes = dtypes or (torch.float16, torch.bfloat16)
    seq = [(min(a, 257), min(b, 257)) if small else (a, b) for a, b in SEQLEN_CLASSES]
    axes = dict(
        head_dim=HEAD_DIMS,
        seqlens=seq,
        heads=HEAD_RATIOS,
        mask=MASKS,
        dtype=tuple(dtypes),
        kind=INPUT_KINDS,
        layout=("contiguous", "strided"),
    )
    if full:
        import itertools

        # head dim x seqlen class x mask x dtype in full (350 rows), the head ratio cycling
        # through MHA/GQA/MQA, plus the covering set with adversarial inputs and layouts
        keys = ("head_dim", "seqlens", "mask", "dtype")
        rows = [
            dict(zip(keys, vals), heads=HEAD_RATIOS[n % len(HEAD_RATIOS)], kind="randn",
                 layout="contiguous")
            for n, vals in enumerate(itertools.product(*(axes[a] for a in keys)))
        ]
        rows += [dict(r, kind=kd, layout=lay) for r in covering_grid(axes)
                 for kd, lay in (("wide_logits", "strided"), ("late_spike", "contiguous"))]
    else:
        rows = covering_grid(axes)
    cases = []
    for r in rows:
        (sq, sk), (h, hkv) = r["seqlens"], r["heads"]
        cases.append(
            Case(
                seqlen_q=sq,
                seqlen_k=sk,
                nheads=h,
                nheads_kv=hkv,
                head_dim=r["head_dim"],
                dtype=r["dtype"],
                kind=r["kind"],
                layout=r["layout"],
                **r["mask"],
            )
        )
    return cases


def with_(case: Case, **changes) -> Case:
    return replace(case, **changes)
