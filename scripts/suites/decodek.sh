# gpu_check.sh suite "decodek" (sourced; $out, $commit, ft() and status are set)
# Session 10, issue 5: where batch-1 decode's ~15 us at zero bytes goes
# (scripts/decode_kernels.py): per-kernel GPU time (profiler), one call replayed from a
# CUDA graph (the decode bench's column), and L layers' calls in one graph per layer.
# Prediction: flashtile's split + combine kernels sum to well under the 19.7 us the
# one-call graph reads at 8k (a few us of launch gaps and graph start), and the
# per-layer graph time falls toward the kernels' sum for both backends.
timeout 200 python3 scripts/decode_kernels.py >"$out/decode_kernels.log" 2>&1 || status=1
grep -E "^g[0-9]|^\|" "$out/decode_kernels.log" | cut -c1-220
