# gpu_check.sh suite "s29d" (sourced; $out, $commit, ft() and status are set)
# Session 29, after s29b / s29c.
# 1. HopperBwdConfig.fixed_prologue (ops/fixed_dq.prologue, on in the fixed-point
#    configs): delta (+ the lse2 boxes), the bounds and the int32 sum's zero fill in one
#    launch instead of four (s29c: 130 us of the 182 us of small kernels per backward at
#    16k tokens x 2048 hidden). GPU tests (the prologue against the separate kernels bit
#    for bit; gradients bitwise equal with it on and off), then an A/B through the
#    public call against fixed_prologue=0, hd 128 causal / non-causal, 4k / 16k, and the
#    per-kernel profile at causal 4k. Prediction: the one launch ~100-110 us (reads O, dO,
#    K, V once: 268 MB, writes 134 MB of zeros), backward +1.2-1.8% at causal 4k, +0.6-0.9%
#    non-causal 4k, ~+0.2% at 16k (noise there); gradients bitwise equal.
# 2. Softcaps at hd 128 (shipped at 57b1fe0 from s29b): causal from 8k keys on the
#    fixed-point kernel, the threshold chosen between 4k (-3%) and 16k (+7%) unmeasured.
#    A/B softcap 30 at causal 8k (and non-causal 4k as a check): the default against
#    FLASHTILE_HOPPER_BWD_REDUCE_FIXED=0 (two kernels, both with the fold). Prediction:
#    causal 8k +0-4%; non-causal 4k +10-16% as in s29b.
# 3. The varlen dispatch test (the causal threshold at 2k, both head dims).
source scripts/suites/lib/steps.sh
O=FLASHTILE_HOPPER_BWD_OVERRIDES
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED
# (test_fixed_dq's tests carry no gpu mark: they run on the GPU where there is one)
timeout 120 python3 -m pytest -q tests/test_fixed_dq.py -k prologue -p no:cacheprovider -rf \
  >"$out/pytest_prologue_cuda.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_prologue_cuda.log" | tail -n 4
gpu_pytest pytest_prologue 200 4 6 tests/test_hopper_bwd_reduce.py \
  -k "prologue or fixed_public_api or default_config"
gpu_pytest pytest_varlen_auto 150 2 4 tests/test_varlen.py -k "hopper_auto or threshold"
timeout 200 python3 scripts/env_ab.py --ab "|$O=fixed_prologue=0" \
  --head-dims 128 --seqlens 4096 16384 --causal 1 0 --rounds 3 \
  --csv "$out/prologue_ab.csv" >"$out/prologue_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/prologue_ab.log" | cut -c1-200
timeout 150 python3 scripts/env_ab.py --softcap 30 --ab "|$F=0" \
  --head-dims 128 --seqlens 8192 --causal 1 --rounds 3 \
  --csv "$out/softcap8k_ab.csv" >"$out/softcap8k_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/softcap8k_ab.log" | cut -c1-200
timeout 100 python3 scripts/env_ab.py --softcap 30 --ab "|$F=0" \
  --head-dims 128 --seqlens 4096 --causal 0 --rounds 3 \
  --csv "$out/softcap4k_ab.csv" >"$out/softcap4k_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/softcap4k_ab.log" | cut -c1-200
timeout 100 python3 scripts/diag_fwd_bwd.py 4,4096,16,128,1 >"$out/diag_prologue.log" 2>&1 \
  || status=1
grep -E " us |^B" "$out/diag_prologue.log" | head -16
