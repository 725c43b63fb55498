# gpu_check.sh suite "s20e" (sourced; $out, $commit, ft() and status are set)
# Stage C's persistent grid shipped at hd 128 non-causal below 4k (configs.
# hopper_fwd_config_c): the stage C / window / softcap / persistent GPU tests and the
# forward grid through flash_attn_func, the covering validation grid with the new
# default, then one-shot against persistent once more (5 interleaved rounds).
# Prediction: tests pass; persistent / one-shot +3-5% at 1k, +0-2% at 2k, level at 4k.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stage_c 280 8 6 tests/test_hopper.py \
  -k "stage_c or c_window or softcap_vs or hopper_vs_reference"
validate_covering validate 200
timeout 100 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 2048 4096 \
  --causal 0 --only gluon-C gluon-Cp --rounds 5 --csv "$out/cp128c.csv" >"$out/cp128c.log" 2>&1 \
  || status=1
grep -A6 "^forward TFLOPS" "$out/cp128c.log"
grep -E "FAILED|MISMATCH|Error" "$out/cp128c.log" | head -5
