# gpu_check.sh suite "s21a" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 20 after its device time ran out (CPU-checked: sm_90 builds, the
# one-shot and persistent builds' SASS unchanged). The persistent stage C's split ring
# (HopperFwdConfig.v_stages=2, opt-in): K ring 3, V ring 2, an O staging tile per
# warpgroup, so the next item's Q loads right after the last PV while O leaves through
# TMA (s20d: with O staged in the Q buffer the next Q waited for the store, Q wait
# 0.7-0.8 us, tail 1.9-2.0). Tests first, then the timeline of the three grids and the
# bench, one-shot / persistent / split, 5 interleaved rounds.
# Prediction (hd 128 non-causal): Q wait 0.3 us, tail ~1.5, fixed + gap 4.4 -> ~3 us per
# item; split / one-shot +3% at 4k, +7-10% at 1k, +1% at 16k; if the V ring of 2 starves
# the PV (V_j loads once PV_{j-2} is done, one step ahead), the step time rises and it
# loses.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_split 300 8 6 tests/test_hopper.py -k "persistent and (split or many)"
timeout 120 python3 scripts/trace_stage_c.py --seqlens 1024 4096 16384 --causal 0 \
  --persistent both --cp-epilogue tma split --csv "$out/trace_split.csv" \
  >"$out/trace_split.log" 2>&1 || status=1
grep -A12 "^per program" "$out/trace_split.log"
timeout 120 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 2048 4096 16384 \
  --causal 0 --only gluon-C gluon-Cp gluon-Cs --rounds 5 --csv "$out/split128.csv" \
  >"$out/split128.log" 2>&1 || status=1
grep -A8 "^forward TFLOPS" "$out/split128.log"
grep -E "FAILED|MISMATCH|Error" "$out/split128.log" "$out/trace_split.log" | head -5
