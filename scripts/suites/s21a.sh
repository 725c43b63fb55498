# gpu_check.sh suite "s21a" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 20 after its device time ran out (CPU-checked: sm_90 builds; the
# shipped one-shot and persistent builds' SASS unchanged). Two opt-in changes to the
# persistent stage C, tests first, then the timeline and the bench, 5 interleaved rounds:
# - the split ring (HopperFwdConfig.v_stages=2): K ring 3, V ring 2, an O staging tile
#   per warpgroup, so the next item's Q loads right after the last PV while O leaves
#   through TMA (s20d: with O staged in the Q buffer the next Q waited for the store, Q
#   wait 0.7-0.8 us, tail 1.9-2.0);
# - the paired causal order (HopperFwdConfig.paired): a head's j-th longest query tile,
#   then its j-th shortest, per program (s20a: the round robin left the busiest program
#   1/0.64-1/0.89 of the mean work, and lost 4-28% causal).
# Predictions (hd 128): non-causal, split / one-shot +3% at 4k, +7-10% at 1k, +1% at 16k
# (fixed cost + gap 4.4 -> ~3 us per item), or a loss if the V ring of 2 starves the PV
# (the step time then rises). Causal, gluon-Cs (split + paired) / one-shot -3% to +3%:
# the pairs balance to ~0.97 at these shapes (1024 units over 132 programs) against the
# one-shot grid's hardware dispatch.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_split 300 8 6 tests/test_hopper.py -k "persistent and (split or many or paired)"
timeout 120 python3 scripts/trace_stage_c.py --seqlens 1024 4096 16384 --causal 0 \
  --persistent both --cp-epilogue tma split --csv "$out/trace_split.csv" \
  >"$out/trace_split.log" 2>&1 || status=1
grep -A12 "^per program" "$out/trace_split.log"
timeout 200 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 2048 4096 16384 \
  --only gluon-C gluon-Cp gluon-Cs --rounds 5 --csv "$out/split128.csv" \
  >"$out/split128.log" 2>&1 || status=1
grep -A12 "^forward TFLOPS" "$out/split128.log"
grep -E "FAILED|MISMATCH|Error" "$out/split128.log" "$out/trace_split.log" | head -5
