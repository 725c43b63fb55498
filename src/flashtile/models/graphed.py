"""One MiniGPT training step captured as a CUDA graph: ``flashtile train --cuda-graph``.

The shakespeare-char step is host-bound on the H200 machines for every attention backend
(kernels are 30-59% of the step's wall time, results.md "stepgpu"): Python launches some
300 kernels per step and the GPU waits for them. Captured once and replayed, the step
costs the host one graph launch, so it runs at the GPU's pace and two backends compare
by the time their kernels take.

What the capture needs, and where it comes from:
- the batch in static tensors (``x``, ``y``), copied in before each replay;
- the learning rate as a tensor on the device (AdamW reads ``group["lr"]`` from it, so
  the schedule moves without a new capture) and AdamW with ``capturable=True`` (its step
  count on the device); ``GraphStep`` switches the optimizer's groups to both, so an
  optimizer restored from a checkpoint of an eager run works;
- dropout drawn on the device at every replay: PyTorch's dropout and SDPA's draw from the
  graph-safe CUDA generator; flashtile's attention draws its (seed, offset) there too
  under capture (``flash.draw_rng_state``);
- autocast without its weight cache (``cache_enabled=False``): a cached cast would be made
  once, at capture, and go stale as AdamW updates the weights;
- gradients allocated by the captured backward and overwritten (not accumulated) at each
  replay: they are set to None before the capture and never zeroed after.

Before the capture, a few eager steps at learning rate 0 run on a side stream (lazy state:
kernels compiled, AdamW's moments allocated, autograd's streams set up). Learning rate 0
leaves the weights bit for bit as they were; AdamW's moments and step count are put back
after (zeros for a fresh optimizer, the restored ones on a resume), and every RNG
restored, so the run starts where an eager one would.
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["GraphStep"]


class GraphStep:
    """``step(x, y, lr) -> loss``: one training step (forward, backward, gradient
    clipping, AdamW) of ``model`` as a CUDA graph replay. The loss returned is the
    graph's static output tensor: read or copy it before the next call."""

    def __init__(self, model, optimizer, shape: tuple[int, int], *, dtype: str = "bf16",
                 grad_clip: float = 1.0, warmup_steps: int = 3):
        params = [p for p in model.parameters() if p.requires_grad]
        if not params or params[0].device.type != "cuda":
            raise ValueError("GraphStep: CUDA graphs need the model on a CUDA device")
        if dtype not in ("bf16", "fp32", "fp64"):
            raise ValueError(f"GraphStep: dtype={dtype!r}; allowed: bf16, fp32, fp64")
        device = params[0].device
        self.model, self.optimizer, self.grad_clip = model, optimizer, grad_clip
        self._autocast = dtype == "bf16"
        self.x = torch.zeros(shape, dtype=torch.long, device=device)
        self.y = torch.zeros(shape, dtype=torch.long, device=device)
        # one learning-rate tensor for every group, read by AdamW inside the graph
        self.lr = torch.zeros((), dtype=torch.float32, device=device)
        for g in optimizer.param_groups:
            g["lr"] = self.lr
            g["capturable"] = True

        cpu_rng, cuda_rng = torch.get_rng_state(), torch.cuda.get_rng_state(device)
        # AdamW's state as it is now (restored from a checkpoint, or none yet)
        saved = {p: {k: v.clone() for k, v in st.items() if torch.is_tensor(v)}
                 for p, st in optimizer.state.items()}
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(warmup_steps):  # lr is 0: the weights do not move
                self._step()
                optimizer.zero_grad(set_to_none=True)
        torch.cuda.current_stream(device).wait_stream(side)
        for p, state in optimizer.state.items():  # back to the state before the warm-up
            for k, v in state.items():
                if not torch.is_tensor(v):
                    continue
                if k in saved.get(p, {}):
                    v.copy_(saved[p][k])
                else:
                    v.zero_()
        torch.set_rng_state(cpu_rng)
        torch.cuda.set_rng_state(cuda_rng, device)
        optimizer.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.loss = self._step()

    def _step(self) -> torch.Tensor:
        ctx = (torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
               if self._autocast else contextlib.nullcontext())
        with ctx:
            _, loss = self.model(self.x, self.y)
        loss.backward()
        if self.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        return loss.detach()

    def __call__(self, x: torch.Tensor, y: torch.Tensor, lr: float) -> torch.Tensor:
        self.x.copy_(x)
        self.y.copy_(y)
        self.lr.fill_(lr)
        self.graph.replay()
        return self.loss
