# gpu_check.sh suite "s13soft" (sourced; $out, $commit, ft() and status are set)
# Session 13. `softcap` (7386e40) passed its 184 GPU cases, but the Gluon softcap ran
# 2-5x slower than without one: tanh_f32's exponential and IEEE division (a slow-path
# reciprocal per score). Now the SOFTCAP constexpr picks tanh.approx.f32 (one MUFU op,
# relative error ~2^-11; flash-attn's choice) for 16-bit inputs on a GPU in every kernel
# (Gluon, portable dense / varlen / KV cache), the accurate tanh for fp32 and under the
# interpreter. Tests: the Gluon softcap cases again, every other softcap GPU test, the
# HF Gemma-2 (softcap) models, tanh.approx's accuracy; then the softcap bench.
# Predictions (TFLOPS, bench_window.py --softcap 50; 7386e40's in brackets): hd 64
# window 1024: Gluon stage A 170-220 [81], stage C 150-200 [57], portable 170-220 [141]
# (the score's extra MUFU op beside the softmax's exp2, at hd 64 MUFU-bound); Mistral
# 16k (hd 128): stage C 400-480 [157], A 380-420 [278]; Gemma-2 8k (hd 256): A 430-480
# [362], C 480-540 [369]; fwd+bwd at hd 64 200-250 [98] and Mistral 320-380 [216].
source scripts/suites/lib/steps.sh
export FLASHTILE_HOPPER_SOFTCAP=1
gpu_pytest pytest_softcap 300 8 8 tests/test_hopper.py tests/test_hopper_bwd.py \
  tests/test_flash.py tests/test_varlen.py tests/test_kvcache.py -k "softcap or tanh"
gpu_pytest pytest_hf_gemma 150 4 4 tests/test_hf.py -k "gemma"
timeout 200 python3 scripts/bench_window.py --softcap 50 >"$out/bench_softcap.log" 2>&1 \
  || status=1
grep -E "TFLOPS|Error" "$out/bench_softcap.log" | cut -c1-110
unset FLASHTILE_HOPPER_SOFTCAP
