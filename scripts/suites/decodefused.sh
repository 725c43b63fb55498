# gpu_check.sh suite "decodefused" (sourced; $out, $commit, ft() and status are set)
# The fused split-KV combine (FLASHTILE_DECODE_FUSED_COMBINE=1: the last split program
# of each query tile merges, no combine launch), built 2026-11-30 and tested on the CPU
# only, where the interpreter runs programs one by one. Its GPU tests (real races,
# repeats, CUDA graphs), then the decode bench with and without it. Prediction: batch-1
# GQA decode under a CUDA graph 19.4 -> ~16 us at 8k and 34 -> ~31 us at 32k (one
# kernel boundary and the combine kernel's own launch latency fewer); eager calls save
# one launch of host time.
FLASHTILE_DECODE_FUSED_COMBINE=1 timeout 200 python3 -m pytest -q -m gpu -n 4 \
  tests/test_kvcache.py -p no:cacheprovider -rf --tb=short >"$out/pytest_fused.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_fused.log" | tail -n 10
for fused in 0 1; do
  FLASHTILE_DECODE_FUSED_COMBINE=$fused ft bench --suite decode --quick --commit "$commit" \
    --csv "$out/bench_decode_fused$fused.csv" >"$out/bench_decode_fused$fused.log" 2>&1 || status=1
  echo "== fused combine $fused"; grep -A 8 "batch 1 decode" "$out/bench_decode_fused$fused.log"
done
