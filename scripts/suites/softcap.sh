# gpu_check.sh suite "softcap" (sourced; $out, $commit, ft() and status are set)
# Session 12 (built after the device time ran out; CPU-checked): a softcap on the Gluon
# forward, stages A and C (SOFTCAP: scores tanh(qk * sm_scale / softcap) by the portable
# kernels' tanh formula, softmax scale softcap * log2(e)), opt-in with
# FLASHTILE_HOPPER_SOFTCAP=1 (hopper_fwd.softcap_mode). ptxas (sm_90): stage A 199-225
# registers with no spills, stage C 168 with none; the capped hd 64 causal stage A would
# spill 836 B, so window_config runs stage C there. The shipped kernels' PTX instructions
# are unchanged (one more f32 parameter). The same switch runs the two-kernel Gluon
# backward with it at hd 64 / 128 (dS times 1 - tanh^2 in both kernels; ptxas: dK/dV at
# hd 64 uncapped for a softcap, 213 / 214 registers, no spills; hd 128 255 with 180 / 240
# B; dQ 128-192, none; the 32 shipped backward builds' PTX instructions unchanged); hd
# 256 keeps the portable backward. Tests: test_hopper_softcap_vs_reference (88 forward
# cases: hd 64 / 128 / 256, causal or not, caps 2 and 30, with and without a 128-key
# window) and test_hopper_bwd_softcap_vs_reference (96 backward cases, MHA / MQA). Bench:
# bench_window.py --softcap 50 (Gemma-2's cap).
# Predictions: forward 1.1-1.3x the portable kernel at hd 64 / 256 (stage A or C; the
# tanh adds ~10 fp32 ops per score to the softmax's ~6, so below the window's
# 1.09-1.28x), 1.3-1.6x at hd 128 (stage C); forward + backward 1.1-1.3x at hd 64 / 128
# (the backward's tanh and its spills at hd 128 cost part of the window's 1.32-1.36x),
# 1.03-1.10x at hd 256 (portable backward).
export FLASHTILE_HOPPER_SOFTCAP=1
timeout 300 python3 -m pytest -q -m gpu -n 8 tests/test_hopper.py tests/test_hopper_bwd.py \
  -k "softcap" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_softcap.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_softcap.log" | tail -n 8
timeout 200 python3 scripts/bench_window.py --softcap 50 >"$out/bench_softcap.log" 2>&1 \
  || status=1
grep -E "TFLOPS|Error" "$out/bench_softcap.log" | cut -c1-110
unset FLASHTILE_HOPPER_SOFTCAP
