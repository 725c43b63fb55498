# gpu_check.sh suite "s22a" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 21 after its device time ran out (CPU-checked: sm_90 builds).
# 1. The split ring's _c_release now waits for V_j to land before releasing V_j's slot
#    for the other warpgroup (before, only K_j: an arrival could count toward the slot's
#    previous tile while the other warpgroup still read it; reachable with a window's
#    left edge or ragged causal ends, never seen in a test). GPU tests of every split
#    build: persistent split, windows / softcaps, many items, and
# 2. the split ring the other way round, K ring 2 / V ring 3 (num_stages=2, v_stages=3,
#    opt-in): tests, timeline, bench. Prediction: V holds its slot a whole step longer
#    than K (released after PV_j, K after S_j), so the V ring of 2 is what slowed the
#    split ring's step by 2-4% in s21a (1.769 against 1.707 us at 4k); with K 2 / V 3
#    the step returns to within 1% of the one-shot grid's, and the split ring gains over
#    one-shot at 4k / 16k too: gluon-Cs* / gluon-C +2-3% at 4k, +0.5-1% at 16k non-causal,
#    causal 16k level to +2%; 1k as the shipped split ring (+/-1%). A loss instead would
#    mean the K ring of 2 starves S (the producer refills K only after both warpgroups'
#    S GEMMs of a tile retire).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s22a 280 8 6 tests/test_hopper.py -k "k2v3 or persistent_window_softcap \
or many_items or (persistent_vs_reference and split)"
timeout 120 python3 scripts/trace_stage_c.py --seqlens 1024 4096 16384 --causal 0 \
  --persistent 1 --cp-epilogue split k2v3 --csv "$out/trace_k2v3.csv" \
  >"$out/trace_k2v3.log" 2>&1 || status=1
grep -A8 "^per program" "$out/trace_k2v3.log"
timeout 200 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 4096 8192 16384 \
  --only gluon-C gluon-Cs gluon-Cs* --cs-config num_stages=2,v_stages=3 --rounds 5 \
  --csv "$out/k2v3_128.csv" >"$out/k2v3_128.log" 2>&1 || status=1
grep -A10 "^forward TFLOPS" "$out/k2v3_128.log"
grep -E "FAILED|MISMATCH|Error" "$out/k2v3_128.log" "$out/trace_k2v3.log" | head -5
