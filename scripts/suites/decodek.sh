# gpu_check.sh suite "decodek" (sourced; $out, $commit, ft() and status are set)
# Session 10, issue 5: where batch-1 decode's ~15 us at zero bytes goes
# (scripts/decode_kernels.py): per-kernel GPU time (profiler) after a dirty and after a
# clean L2 flush, one call replayed from a CUDA graph, and L layers' calls in one graph
# per layer; flashtile with the combine launched by PDL off / on, combine chunk 16 / 32.
# First run (a6549c9): split 11.5 + combine 3.5 us at 8k GQA, cuDNN 10.0 + 3.8; per layer
# 15.4 against 13.8 us. Predictions (second run): with a clean flush both backends'
# kernels fall by several us at 8k (the write-back of do_bench-style dirty lines); PDL
# takes 1.5-2.5 us off every per-layer time (the combine's launch hidden), kernels
# unchanged; chunk 32 takes <= 0.5 us off the combine. The KV-cache GPU tests run with PDL
# on (the default now).
timeout 200 python3 -m pytest -q -m gpu -n 8 tests/test_kvcache.py -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_decodek.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_decodek.log" | tail -n 8
timeout 300 python3 scripts/decode_kernels.py >"$out/decode_kernels.log" 2>&1 || status=1
grep -E "^g[0-9]|^\|" "$out/decode_kernels.log" | cut -c1-200
