"""Train MiniGPT on Tiny Shakespeare: ``flashtile train`` and the ``train()`` API.

The recipe is nanoGPT's shakespeare-char: AdamW (betas 0.9/0.99, weight decay 0.1 on
matrices only), linear warm-up then cosine decay to ``min_lr``, gradient clipping at
1.0, bf16 autocast on the GPU, dropout 0.2. Every ``eval_interval`` steps the loss on
fixed windows of both splits is measured; the best state by validation loss is kept
(in memory, on its device) and written at the end with the last state:

    OUT/best.safetensors, OUT/last.safetensors   checkpoints (models/checkpoint.py)
    OUT/log.json                                 every evaluation, per-step train loss,
                                                 configs, timings
    OUT/loss.png                                 train and val loss against step

Timing: the first steps compile the Triton kernels (and cuDNN/cuBLAS plans). That
one-time warm-up runs before the timed loop, on a throwaway copy of the model and
optimizer with every RNG restored afterwards, so the run itself is unchanged; it is
reported apart (``warmup_s``). ``train_s`` is the wall time of the training loop with
its periodic evaluations; ``step_ms`` and ``tokens_per_s`` leave the evaluations out.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch

from . import checkpoint
from .data import Splits, eval_batches, load_text, make_splits, random_batch
from .graphed import GraphStep
from .minigpt import BACKENDS, MiniGPT, MiniGPTConfig

__all__ = ["PRESETS", "TrainConfig", "TrainResult", "lr_at", "plot_loss_curves", "preset",
           "train"]


@dataclass
class TrainConfig:
    """Optimisation and bookkeeping; the model's shape lives in ``MiniGPTConfig``."""

    steps: int = 2000  # length of the schedule (cosine decay ends here)
    batch_size: int = 64
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # 0 disables clipping
    eval_interval: int = 250
    eval_batches: int = 8  # per split, full batches of fixed windows
    log_interval: int = 10  # progress-bar refresh (a host sync)
    seed: int = 1337
    dtype: str = "auto"  # "bf16" (autocast; GPU default), "fp32" (CPU default), "fp64"
    device: str = "auto"
    cuda_graph: bool = False  # each step one CUDA graph replay (models/graphed.py)

    def resolved(self) -> TrainConfig:
        cuda = torch.cuda.is_available()
        device = self.device if self.device != "auto" else ("cuda" if cuda else "cpu")
        dtype = self.dtype if self.dtype != "auto" else (
            "bf16" if device.startswith("cuda") else "fp32")
        if dtype not in ("bf16", "fp32", "fp64"):
            raise ValueError(f"dtype={dtype!r}; allowed: bf16, fp32, fp64")
        if dtype == "bf16" and not device.startswith("cuda"):
            raise ValueError("dtype='bf16' (autocast) needs a CUDA device; the interpreter's "
                             "bf16 dots are not trustworthy")
        if self.cuda_graph and not device.startswith("cuda"):
            raise ValueError("cuda_graph=True needs a CUDA device")
        return replace(self, device=device, dtype=dtype)


# name -> (model overrides, train overrides)
PRESETS: dict[str, tuple[dict, dict]] = {
    # nanoGPT's shakespeare-char shape; on an H200 with SDPA: val 1.477 after ~2000 steps
    "shakespeare-char": (
        dict(n_layer=6, n_head=6, n_embd=384, block_size=256, dropout=0.2),
        dict(steps=2000, batch_size=64, lr=1e-3, min_lr=1e-4, warmup_steps=100,
             eval_interval=250, eval_batches=8),
    ),
    # the whole path (flashtile fwd + bwd with dropout) under the Triton interpreter on
    # one CPU core in ~20 s: about 1.5 s a step, 0.7 s an evaluation
    "tiny": (
        dict(n_layer=2, n_head=2, n_embd=32, block_size=32, dropout=0.1),
        dict(steps=12, batch_size=2, lr=1e-2, min_lr=1e-3, warmup_steps=2,
             eval_interval=6, eval_batches=1, log_interval=1),
    ),
}


def preset(name: str, **overrides) -> tuple[MiniGPTConfig, TrainConfig]:
    """(model config, train config) of preset ``name``; ``overrides`` go to whichever
    dataclass has the field."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    m, t = (dict(d) for d in PRESETS[name])
    model_fields = {f.name for f in fields(MiniGPTConfig)}
    for k, v in overrides.items():
        (m if k in model_fields else t)[k] = v
    return MiniGPTConfig(**m), TrainConfig(**t)


def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warm-up over ``warmup_steps``, then cosine from ``lr`` to ``min_lr`` at
    ``steps``; ``min_lr`` after that."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / (tc.warmup_steps + 1)
    if step >= tc.steps:
        return tc.min_lr
    ratio = (step - tc.warmup_steps) / max(1, tc.steps - tc.warmup_steps)
    return tc.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (tc.lr - tc.min_lr)


def make_optimizer(model: MiniGPT, tc: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (dim >= 2) only; fused kernels on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [dict(params=[p for p in params if p.dim() >= 2], weight_decay=tc.weight_decay),
              dict(params=[p for p in params if p.dim() < 2], weight_decay=0.0)]
    fused = tc.device.startswith("cuda")
    return torch.optim.AdamW(groups, lr=tc.lr, betas=(tc.beta1, tc.beta2), fused=fused)


def _autocast(tc: TrainConfig):
    if tc.dtype == "bf16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _sync(tc: TrainConfig) -> None:
    if tc.device.startswith("cuda"):
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------------
# one step, evaluation, warm-up
# ----------------------------------------------------------------------------------


def train_step(model, optimizer, x, y, lr: float, tc: TrainConfig) -> torch.Tensor:
    """Forward, backward, clip, AdamW step at ``lr``. Returns the loss (on device)."""
    for g in optimizer.param_groups:
        g["lr"] = lr
    with _autocast(tc):
        _, loss = model(x, y)
    loss.backward()
    if tc.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


@torch.no_grad()
def evaluate(model, batches: dict[str, list], tc: TrainConfig) -> dict[str, float]:
    """Mean loss over each split's fixed windows, dropout off."""
    model.eval()
    out = {}
    for name, bs in batches.items():
        with _autocast(tc):
            losses = torch.stack([model(x, y)[1] for x, y in bs])
        out[name] = losses.mean().item()
    model.train()
    return out


def warm_up(model, tc: TrainConfig, x, y, eval_x) -> float:
    """Compile everything the loop will launch (train step with dropout, optimizer,
    eval forward) on copies; restores every RNG. Returns the seconds it took."""
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state() if tc.device.startswith("cuda") else None
    t0 = time.perf_counter()
    m = copy.deepcopy(model)
    opt = make_optimizer(m, tc)
    for _ in range(2):  # the optimizer's first step takes its state-init path
        train_step(m, opt, x, y, tc.lr, tc)
    with torch.no_grad(), _autocast(tc):
        m.eval()
        m(eval_x)
    _sync(tc)
    dt = time.perf_counter() - t0
    del m, opt
    torch.set_rng_state(cpu_rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state(cuda_rng)
    return dt


# ----------------------------------------------------------------------------------
# the loop
# ----------------------------------------------------------------------------------


@dataclass
class TrainResult:
    model: MiniGPT
    train_losses: list[float]  # one per step, from step 0 (resumed runs included)
    evals: list[dict]  # {"step", "train_loss", "val_loss", "lr", "time_s"}
    summary: dict = field(default_factory=dict)


@dataclass
class _State:
    """What the loop carries between steps and into checkpoints."""

    evals: list = field(default_factory=list)
    train_losses: list = field(default_factory=list)
    best_val: float = float("inf")
    best_step: int = -1
    best: checkpoint.Checkpoint | None = None

    def extra(self) -> dict:
        return dict(evals=self.evals, train_losses=self.train_losses, best_val=self.best_val,
                    best_step=self.best_step)


def _build(mc: MiniGPTConfig, tc: TrainConfig):
    torch.manual_seed(tc.seed)
    model = MiniGPT(mc).to(tc.device)
    if tc.dtype == "fp64":
        model = model.double()
    model.train()
    gen = torch.Generator(device=tc.device)
    gen.manual_seed(tc.seed)
    return model, make_optimizer(model, tc), gen


def _snap(model, optimizer, gen, step, mc, tc, splits, st: _State):
    return checkpoint.snapshot(model, optimizer, step=step, model_config=mc.to_dict(),
                               train_config=asdict(tc), vocab=splits.tokenizer.chars,
                               data_generator=gen, extra=st.extra())


def train(mc: MiniGPTConfig, tc: TrainConfig, splits: Splits | None = None, *,
          out: str | Path | None = None, resume: str | Path | None = None,
          stop_at: int | None = None, progress: bool = False, warmup: bool | None = None,
          log=print) -> TrainResult:
    """Train from scratch (or from ``resume``, a checkpoint file or directory) up to step
    ``stop_at`` (default ``tc.steps``). ``out``: where checkpoints, log and figure go
    (None writes nothing). ``warmup``: the untimed compile pass, default on CUDA."""
    tc = tc.resolved()
    splits = (splits or make_splits(load_text())).to(tc.device)
    mc = replace(mc, vocab_size=splits.tokenizer.vocab_size)
    model, optimizer, gen = _build(mc, tc)
    st, start = _State(), 0
    if resume is not None:
        ck = checkpoint.load(resume, tc.device, which="last")
        checkpoint.restore(ck, model, optimizer, data_generator=gen)
        start = ck.step
        ex = ck.meta["extra"]
        st = _State(ex["evals"], ex["train_losses"][:start], ex["best_val"], ex["best_step"])
        st.best = checkpoint.load(resume, tc.device, which="best") if st.best_step >= 0 else None
    stop = tc.steps if stop_at is None else stop_at
    B, T = tc.batch_size, mc.block_size
    batches = {"train": eval_batches(splits.train, B, T, tc.eval_batches),
               "val": eval_batches(splits.val, B, T, tc.eval_batches)}
    warmup_s = 0.0
    if warmup if warmup is not None else tc.device.startswith("cuda"):
        x, y = random_batch(splits.train, B, T, torch.Generator(tc.device).manual_seed(0))
        warmup_s = warm_up(model, tc, x, y, batches["val"][0][0])
    graphed = None
    if tc.cuda_graph:
        t = time.perf_counter()
        graphed = GraphStep(model, optimizer, (B, T), dtype=tc.dtype, grad_clip=tc.grad_clip)
        _sync(tc)
        warmup_s += time.perf_counter() - t
    log(f"MiniGPT {model.num_params() / 1e6:.2f}M params, backend {mc.backend}, {tc.device} "
        f"{tc.dtype}{', CUDA graph' if graphed else ''}, steps {start}->{stop}, batch {B} x "
        f"ctx {T}" + (f"; warm-up (compile) {warmup_s:.1f} s, not timed" if warmup_s else ""))
    losses = torch.zeros(max(stop - start, 0), dtype=torch.float64, device=tc.device)
    bar = _bar(start, stop, progress)
    eval_s, t_log, seen_log = 0.0, time.perf_counter(), start
    _sync(tc)
    t0 = time.perf_counter()
    for step in range(start, stop + 1):
        due = step % tc.eval_interval == 0 or step == stop
        if due and not (st.evals and st.evals[-1]["step"] == step):  # resumed: done
            _sync(tc)
            te = time.perf_counter()
            losses_so_far = losses[: step - start].tolist()
            st.train_losses = st.train_losses[:start] + losses_so_far
            _evaluate_and_keep(model, optimizer, gen, step, mc, tc, splits, batches, st,
                               elapsed=te - t0)
            eval_s += time.perf_counter() - te
            if out is not None:
                _write_log(out, mc, tc, st, None)
        if step == stop:
            break
        x, y = random_batch(splits.train, B, T, gen)
        if graphed is not None:
            losses[step - start] = graphed(x, y, lr_at(step, tc))
        else:
            losses[step - start] = train_step(model, optimizer, x, y, lr_at(step, tc), tc)
        if bar is not None and (step + 1) % tc.log_interval == 0:
            now = time.perf_counter()
            bar.set_postfix(loss=f"{losses[step - start].item():.3f}",
                            tok_s=f"{(step + 1 - seen_log) * B * T / (now - t_log):.3g}")
            bar.update(step + 1 - bar.n)
            t_log, seen_log = now, step + 1
    _sync(tc)
    train_s = time.perf_counter() - t0
    if bar is not None:
        bar.update(stop - bar.n)
        bar.close()
    summary = _summary(mc, tc, st, stop - start, train_s, eval_s, warmup_s)
    if out is not None:
        _finish(out, model, optimizer, gen, stop, mc, tc, splits, st, summary, log)
    log(_summary_line(summary))
    return TrainResult(model, st.train_losses, st.evals, summary)


def _bar(start: int, stop: int, progress: bool):
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=stop, initial=start, desc="train", file=sys.stderr, unit="step")


def _evaluate_and_keep(model, optimizer, gen, step, mc, tc, splits, batches, st, elapsed):
    losses = evaluate(model, batches, tc)
    rec = dict(step=step, train_loss=losses["train"], val_loss=losses["val"],
               lr=lr_at(step, tc), time_s=round(elapsed, 3))
    st.evals.append(rec)
    if losses["val"] < st.best_val:
        st.best_val, st.best_step = losses["val"], step
        st.best = _snap(model, optimizer, gen, step, mc, tc, splits, st)


def _summary(mc, tc, st: _State, n_steps, train_s, eval_s, warmup_s) -> dict:
    step_s = max(train_s - eval_s, 1e-9)
    last = st.evals[-1] if st.evals else {}
    device = (torch.cuda.get_device_name() if tc.device.startswith("cuda")
              else "CPU (Triton interpreter)" if mc.backend == "flashtile" else "CPU")
    return dict(backend=mc.backend, device=device, dtype=tc.dtype, cuda_graph=tc.cuda_graph,
                steps=n_steps,
                batch_size=tc.batch_size, block_size=mc.block_size,
                final_val=last.get("val_loss"), best_val=st.best_val, best_step=st.best_step,
                train_s=round(train_s, 3), eval_s=round(eval_s, 3), warmup_s=round(warmup_s, 3),
                step_ms=round(1e3 * step_s / max(n_steps, 1), 3),
                tokens_per_s=round(n_steps * tc.batch_size * mc.block_size / step_s, 1),
                torch=torch.__version__)


def _summary_line(s: dict) -> str:
    return (f"done: {s['steps']} steps in {s['train_s']:.1f} s (evals {s['eval_s']:.1f} s; "
            f"warm-up {s['warmup_s']:.1f} s apart), {s['step_ms']:.2f} ms/step, "
            f"{s['tokens_per_s']:.4g} tokens/s; best val {s['best_val']:.4f} at step "
            f"{s['best_step']}, final val {s['final_val']:.4f}")


def _write_log(out, mc, tc, st: _State, summary: dict | None) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = dict(model_config=mc.to_dict(), train_config=asdict(tc), evals=st.evals,
               best_val=st.best_val, best_step=st.best_step)
    if summary is not None:
        doc.update(summary=summary, train_losses=st.train_losses)
    (out / "log.json").write_text(json.dumps(doc, indent=1))


def _finish(out, model, optimizer, gen, step, mc, tc, splits, st, summary, log) -> None:
    out = Path(out)
    t0 = time.perf_counter()
    checkpoint.write(_snap(model, optimizer, gen, step, mc, tc, splits, st),
                     out / "last.safetensors")
    if st.best is not None:
        st.best.meta["extra"] = st.extra()  # the full history, up to the end of the run
        checkpoint.write(st.best, out / "best.safetensors")
    summary["io_s"] = round(time.perf_counter() - t0, 3)
    _write_log(out, mc, tc, st, summary)
    fig = plot_loss_curves([dict(train_losses=st.train_losses, evals=st.evals)],
                           out / "loss.png", labels=[mc.backend])
    log(f"wrote {out}/best.safetensors (val {st.best_val:.4f} at step {st.best_step}), "
        f"last.safetensors, log.json" + (", loss.png" if fig else " (no matplotlib: no figure)"))


def plot_loss_curves(runs: list[dict], path, labels: list[str] | None = None,
                     title: str = "MiniGPT on Tiny Shakespeare") -> Path | None:
    """Train loss per step (thin) and evaluated train/val loss (markers) for each run
    (dicts with ``train_losses`` and ``evals``, as in log.json). None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    labels = labels or [f"run {i}" for i in range(len(runs))]
    for i, (run, label) in enumerate(zip(runs, labels)):
        color = f"C{i}"
        ax.plot(range(len(run["train_losses"])), run["train_losses"], color=color,
                alpha=0.3, lw=0.7, label=f"{label} train (per step)")
        steps = [e["step"] for e in run["evals"]]
        ax.plot(steps, [e["val_loss"] for e in run["evals"]], "o-", color=color, ms=3,
                label=f"{label} val")
        ax.plot(steps, [e["train_loss"] for e in run["evals"]], "s--", color=color, ms=3,
                lw=0.8, label=f"{label} train (eval)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/char)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------
# CLI: flashtile train
# ----------------------------------------------------------------------------------


def configure_parser(p) -> None:
    p.add_argument("--preset", choices=sorted(PRESETS), default=None,
                   help="default: shakespeare-char on a GPU, tiny (interpreter) on a CPU")
    p.add_argument("--steps", type=int, help="schedule length (default: the preset's)")
    p.add_argument("--backend", choices=BACKENDS, default="flashtile")
    p.add_argument("--out", default="out/minigpt", help="checkpoints, log.json, loss.png")
    p.add_argument("--data", default=None, help="Tiny Shakespeare text file")
    p.add_argument("--download", action="store_true",
                   help="fetch the public copy if --data is missing (sha256-checked)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/last.safetensors")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument("--eval-interval", type=int, default=None)
    p.add_argument("--dtype", choices=("auto", "bf16", "fp32", "fp64"), default="auto")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--cuda-graph", action=argparse.BooleanOptionalAction, default=None,
                   help="capture the training step once as a CUDA graph and replay it "
                        "(the host launches one graph per step; needs a GPU). Default: on "
                        "with a GPU (eager, the step is host-bound: Python launches every "
                        "kernel), --no-cuda-graph for eager steps")
    p.add_argument("--bench", action="store_true",
                   help="instead of training: step time and tokens/s per backend and shape")
    p.add_argument("--bench-backends", default="flashtile,sdpa-cudnn,sdpa-flash",
                   help="NAME[:graph][@VAR=VALUE...],...; :graph replays the step as a "
                        "CUDA graph")
    p.add_argument("--bench-shapes", default="64x256,16x1024", help="BATCHxCTX,...")
    p.add_argument("--bench-steps", type=int, default=50)
    p.add_argument("--bench-rounds", type=int, default=5,
                   help="--bench: interleaved rounds the steps are split into")
    p.add_argument("--bench-profile", action="store_true",
                   help="--bench: also print a torch.profiler kernel table per backend")
    p.add_argument("--csv", default=None, help="--bench: write rows here")


def run(args) -> int:
    if args.bench:
        from .train_bench import run_bench

        return run_bench(args)
    on_gpu = torch.cuda.is_available()
    name = args.preset or ("shakespeare-char" if on_gpu else "tiny")
    if args.preset is None and not on_gpu:
        print("flashtile train: no CUDA device, so preset 'tiny' runs under the Triton "
              "interpreter in fp32 (pass --preset shakespeare-char to insist; hours on a CPU)")
    elif name == "shakespeare-char" and not on_gpu:
        print("flashtile train: warning: shakespeare-char on the CPU interpreter is very slow")
    over = {k: v for k, v in dict(steps=args.steps, seed=args.seed, batch_size=args.batch_size,
                                  lr=args.lr, dropout=args.dropout,
                                  eval_interval=args.eval_interval).items() if v is not None}
    graph = on_gpu if args.cuda_graph is None else args.cuda_graph
    mc, tc = preset(name, backend=args.backend, dtype=args.dtype, cuda_graph=graph, **over)
    splits = make_splits(load_text(args.data, download=args.download))
    resume = args.out if args.resume else None
    print(f"flashtile train: preset {name}, data {len(splits.train):,} train / "
          f"{len(splits.val):,} val chars, vocab {splits.tokenizer.vocab_size}")
    train(mc, tc, splits, out=args.out, resume=resume, progress=not args.no_progress)
    return 0
