# gpu_check.sh suite "s30f" (sourced; $out, $commit, ft() and status are set)
# Session 30: s30e's ncu had the hd 64 non-causal 4k backward's kernels at 1.72 (dK/dV)
# + 1.25 (dQ) ms, level with cuDNN's 2.88 + 0.07 + 0.05, where the perf table at 7db4c84
# reads flashtile's backward (fwd+bwd less fwd) ~3.6 ms against cuDNN's ~3.2. Every kernel
# of one forward+backward under the torch profiler, both libraries, same inputs, and
# the host's time per call. Prediction: flashtile's kernels sum to ~4.2 ms (fwd 1.18 +
# bwd 3.0) and the rest is GPU idle time between them (host-bound launches) or a kernel
# the bench adds that ncu's range left out.
for shape in 4,4096,32,64,0 1,16384,32,64,0 4,4096,16,128,0; do
  DIAG_BACKENDS=flashtile,sdpa-cudnn timeout 120 python3 scripts/diag_fwd_bwd.py $shape \
    >"$out/diag_$shape.log" 2>&1 || status=1
  grep -E "causal=|us in kernels|^host|  [0-9. ]+us" "$out/diag_$shape.log" | cut -c1-120 | head -40
done
