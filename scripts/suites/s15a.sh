# gpu_check.sh suite "s15a" (sourced; $out, $commit, ft() and status are set)
# Session 15. (1) Stage C at hd 128 now waits for its K tile first (c_k_wait_first on,
# `ckfirst`): its GPU tests with the shipped config (stage C, its window and softcap
# builds, the other order). (2) The fused backward with HopperBwdConfig.dq_defer (opt-in):
# each consumer step issues the dQ GEMMs of two iterations back, then its S^T right behind
# them, and stores that dQ while S^T runs (one tensor-core drain per step instead of two,
# the 16 KB dQ store and its two bar.sync off the GEMMs' path; ptxas sm_90: no wgmma
# serialization, spills 460 / 692 B racing at hd 128 against 500 / 740). Its GPU tests
# (-k fused), then bench_hopper_bwd.py at 4k / 16k beside the shipped two-kernel backward.
# Prediction: racing at hd 128 +5-10% (0.82-0.85x cuDNN's backward -> 0.87-0.92x), hd 64
# +3-8%; ordered +0-5% (the writer's in-order adds set its pace). ~6 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stage_c 150 8 6 tests/test_hopper.py \
  -k "stage_c or c_window or softcap_vs"
gpu_pytest pytest_fused 200 8 6 tests/test_hopper_bwd.py -k "fused"
timeout 240 python3 scripts/bench_hopper_bwd.py --seqlens 4096 16384 \
  --only gluon-bwd fused-nd fused-nd-dfr fused-det fused-det-dfr \
  --csv "$out/bench_dqdefer.csv" >"$out/bench_dqdefer.log" 2>&1 || status=1
grep -E "FAILED|MISMATCH|Error|rel\|" "$out/bench_dqdefer.log" | cut -c1-200 | head -n 20
tail -n 10 "$out/bench_dqdefer.log"
