# gpu_check.sh suite "softcap" (sourced; $out, $commit, ft() and status are set)
# Session 12 (built after the device time ran out; CPU-checked): a softcap on the Gluon
# forward, stages A and C (SOFTCAP: scores tanh(qk * sm_scale / softcap) by the portable
# kernels' tanh formula, softmax scale softcap * log2(e)), opt-in with
# FLASHTILE_HOPPER_SOFTCAP=1 (hopper_fwd.softcap_mode). ptxas (sm_90): stage A 199-225
# registers with no spills, stage C 168 with none; the capped hd 64 causal stage A would
# spill 836 B, so window_config runs stage C there. The shipped kernels' PTX instructions
# are unchanged (one more f32 parameter). The backward of a softcapped call stays
# portable. Tests: test_hopper_softcap_vs_reference (88 cases: hd 64 / 128 / 256, causal
# or not, caps 2 and 30, with and without a 128-key window), then the window and
# problem-ok tests beside them. Bench: bench_window.py --softcap 50 (Gemma-2's cap).
# Predictions: forward 1.1-1.3x the portable kernel at hd 64 / 256 (stage A; the tanh
# adds ~10 fp32 ops per score to the softmax's ~6, so below the window's 1.09-1.28x), 1.3-
# 1.6x at hd 128 (stage C); forward + backward 1.03-1.10x (the backward is portable).
export FLASHTILE_HOPPER_SOFTCAP=1
timeout 300 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py -k "softcap" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_softcap.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_softcap.log" | tail -n 8
timeout 200 python3 scripts/bench_window.py --softcap 50 >"$out/bench_softcap.log" 2>&1 \
  || status=1
grep -E "TFLOPS|Error" "$out/bench_softcap.log" | cut -c1-110
unset FLASHTILE_HOPPER_SOFTCAP
