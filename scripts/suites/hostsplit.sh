# gpu_check.sh suite "hostsplit" (sourced; $out, $commit, ft() and status are set)
# Session 10: which layer of a flashtile forward+backward holds the host time on the GPU
# machine (scripts/host_split.py): launchers alone, autograd forward / backward, SDPA
# cuDNN's path, a trivial Triton launch. Gluon path at B2 S640 H16 D128 causal, portable
# (MiniGPT's) at B4 S256 H6 D64 causal. Prediction: the launchers hold most of it, and
# the Gluon launches cost 2-3x a trivial kernel[grid] each (descriptors, the binding of
# ~20 arguments); SDPA's forward+backward host cost is a fraction of flashtile's.
# Second run: the first (5114cb8) read autograd.grad at 983 us per call for the portable
# shape against 109 us for attention_backward alone; now with the GPU time per call
# (events) and the torch profiler's per-op CPU / GPU time. Prediction: something beyond
# the launchers (a sync, a copy, or GPU-bound kernels) shows there.
timeout 120 python3 scripts/host_split.py >"$out/host_split.log" 2>&1 || status=1
grep -E "^([|]|   |== )" "$out/host_split.log" | cut -c1-110
