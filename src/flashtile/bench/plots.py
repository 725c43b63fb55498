"""Figure: TFLOPS against seqlen, one panel per (mode, causal) x head dim, one line per
backend, the matmul ceiling dashed. Uses matplotlib's object API (no pyplot, no global
backend switch), so it works headless."""

from __future__ import annotations

from pathlib import Path

from .flops import MODES
from .harness import ATTN_KERNEL, BenchResult

_MODE_TITLE = {"fwd": "forward", "fwd_bwd": "forward + backward"}


def _series(result: BenchResult, mode: str, causal: bool, head_dim: int) -> dict:
    """backend -> sorted [(seqlen, tflops)] for one panel."""
    lines: dict[str, list[tuple[int, float]]] = {}
    for r in result.records:
        s = r.shape
        if r.kernel != ATTN_KERNEL or r.metric != f"{mode}_tflops":
            continue
        if s.causal == causal and s.head_dim == head_dim:
            lines.setdefault(r.backend, []).append((s.seqlen, r.value))
    return {b: sorted(points) for b, points in lines.items()}


def _colors(result: BenchResult) -> dict[str, str]:
    """One fixed colour per backend across all panels, in the requested order."""
    names = dict.fromkeys([*result.backends, *(r.backend for r in result.records)])
    return {name: f"C{i % 10}" for i, name in enumerate(names)}


def _k(n: int) -> str:
    """1024 -> '1k', 1000 -> '1000'."""
    return f"{n // 1024}k" if n % 1024 == 0 else str(n)


def plot_tflops(result: BenchResult, path: str | Path, title: str = "") -> Path:
    """Write the figure to ``path`` (format from the suffix, e.g. .png) and return it."""
    from matplotlib.figure import Figure

    shapes = {r.shape for r in result.records if r.kernel == ATTN_KERNEL}
    head_dims = sorted({s.head_dim for s in shapes})
    modes = [m for m in MODES if any(r.metric == f"{m}_tflops" for r in result.records)]
    panels = [(m, c) for m in modes for c in sorted({s.causal for s in shapes})]
    seqlens = sorted({s.seqlen for s in shapes})
    colors = _colors(result)
    if not panels or not head_dims:
        raise ValueError("nothing to plot: no TFLOPS were measured")
    fig = Figure(figsize=(4.2 * len(head_dims), 3.4 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), len(head_dims), squeeze=False, sharex=True)
    for row, (mode, causal) in enumerate(panels):
        for col, head_dim in enumerate(head_dims):
            ax = axes[row][col]
            for backend, points in _series(result, mode, causal, head_dim).items():
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", label=backend, color=colors[backend])
            if result.matmul_tflops:
                ax.axhline(result.matmul_tflops, ls="--", c="grey", lw=1, label="bf16 matmul")
            ax.set_xscale("log", base=2)
            ax.set_xticks(seqlens, labels=[_k(n) for n in seqlens])
            ax.minorticks_off()
            ax.set_ylim(bottom=0)
            ax.set_title(f"{_MODE_TITLE[mode]}, hd {head_dim}, {'causal' if causal else 'full'}")
            ax.set_xlabel("seqlen")
            ax.set_ylabel("TFLOPS")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize="small")
    if title:
        fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
