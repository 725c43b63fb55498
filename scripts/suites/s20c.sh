# gpu_check.sh suite "s20c" (sourced; $out, $commit, ft() and status are set)
# The same timeline (scripts/trace_stage_c.py) for the persistent stage C beside the
# one-shot one. s20b, one-shot at hd 128 non-causal 4k: Q wait 0.54 us, prologue 1.92,
# 31 steps of 1.725, tail 1.50, 1.28 between programs on an SM: ~5.3 us (3 steps) of
# fixed cost per program, the whole gap to cuDNN (the loop alone runs at ~640 TFLOPS).
# Prediction for the persistent grid, which measured level: its items keep a prologue
# of ~1.5-2 us (the first S GEMM and softmax of both warpgroups together, and what the
# turn hand-over across items adds), so the Q wait and the gap it removes come back
# elsewhere.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_persistent 330 4 4 tests/test_hopper.py -k "persistent and (1prog or many)"
timeout 200 python3 scripts/trace_stage_c.py --seqlens 1024 4096 16384 --causal 0 \
  --persistent both --csv "$out/trace_cp.csv" >"$out/trace_cp.log" 2>&1 || status=1
grep -A12 "^per program" "$out/trace_cp.log"
grep -E "Error|error" "$out/trace_cp.log" | head -5
