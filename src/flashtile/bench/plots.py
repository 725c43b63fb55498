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
    return _save(fig, path, title)


def plot_ratios(result: BenchResult, path: str | Path, backends=("flashtile",), title: str = "",
                floors: dict | None = None) -> Path:
    """A heatmap per (backend, mode): rows (head dim, causal), columns seqlen, each cell
    the backend's ratio to the reference (sdpa-cudnn, measured in the same run) written
    in it; green above 1, red below. ``floors`` ({mode: ratio}) outlines the cells below
    a floor in black. Returns ``path``. ``flashtile bench --ratio-plot`` draws it, also
    from saved CSVs (``--from-csv``)."""
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.figure import Figure

    cells: dict[tuple, float] = {}
    for r in result.records:
        if r.kernel == ATTN_KERNEL and r.metric.endswith("_vs_sdpa_cudnn"):
            mode = r.metric.removesuffix("_vs_sdpa_cudnn")
            cells[(r.backend, mode, r.shape.head_dim, r.shape.causal, r.shape.seqlen)] = r.value
    modes = [m for m in MODES if any(k[1] == m for k in cells)]
    backends = [b for b in backends if any(k[0] == b for k in cells)]
    if not modes or not backends:
        raise ValueError("nothing to plot: no ratios to sdpa-cudnn in these results")
    rows = sorted({(k[2], k[3]) for k in cells})
    seqlens = sorted({k[4] for k in cells})
    floors = floors or {}
    norm = TwoSlopeNorm(vmin=0.6, vcenter=1.0, vmax=1.3)
    panels = [(b, m) for b in backends for m in modes]
    fig = Figure(figsize=(1.1 * len(seqlens) * len(panels) + 1.5, 0.42 * len(rows) + 1.4),
                 layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (backend, mode) in zip(axes, panels, strict=True):
        grid = [[cells.get((backend, mode, hd, causal, n), float("nan")) for n in seqlens]
                for hd, causal in rows]
        image = ax.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto")
        for i, line in enumerate(grid):
            for j, value in enumerate(line):
                if value == value:  # not NaN
                    ax.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize="small")
                    if value < floors.get(mode, 0.0):
                        ax.add_patch(_outline(j, i))
        ax.set_xticks(range(len(seqlens)), labels=[_k(n) for n in seqlens])
        ax.set_yticks(range(len(rows)),
                      labels=[f"hd {hd} {'causal' if c else 'full'}" for hd, c in rows])
        floor = f", floor {floors[mode]:.2f}x" if mode in floors else ""
        ax.set_title(f"{backend} {_MODE_TITLE[mode]} / cuDNN{floor}", fontsize="medium")
        ax.set_xlabel("seqlen")
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="ratio to SDPA cuDNN")
    return _save(fig, path, title)


def _outline(x: int, y: int):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="black", lw=2)


def _save(fig, path: str | Path, title: str) -> Path:
    """Title the figure (if any), write it to ``path`` (parents made) and return it."""
    if title:
        fig.suptitle(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
