# gpu_check.sh suite "s29b" (sourced; $out, $commit, ft() and status are set)
# Written at the end of session 28 (no device time left) for the next session.
# HopperBwdConfig.softcap_fold (opt-in): dS^T's factor 1 - t^2 folded into P^T before
# the dV GEMM, so one fp32 tile stays live across it instead of two. Launch-specialised
# sm_90 builds at hd 128 (compile_sm90.py --hopper-bwd --spec --loops): two-kernel dK/dV
# reloads per step 6 -> 0 non-causal, 23 / 6 -> 7 / 0 causal; the fixed-point one-kernel
# 26 -> 1 non-causal, 33 -> 15 causal (one loop).
# 1. GPU tests with it forced: the two-kernel softcap tests (through run_case), and the
#    fixed-point public-API tests with the one-kernel forced (softcaps among them).
# 2. A/B through the public call, softcap 30, hd 128, causal and not, 4k / 16k: the
#    default (two kernels), it with softcap_fold, the fixed-point one-kernel forced
#    (FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1), and that with softcap_fold.
# Prediction: the two-kernel backward +2-6% with the fold (6 reloads a step gone); the
# one-kernel +15-25% with it (26 gone), and then +3-10% over two kernels non-causal
# from 4k (what the uncapped non-causal one-kernel gains), which would put softcapped
# calls back on the one-kernel backward.
source scripts/suites/lib/steps.sh
O=FLASHTILE_HOPPER_BWD_OVERRIDES
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED
FLASHTILE_HOPPER_BWD_OVERRIDES=softcap_fold=1 gpu_pytest pytest_softcap_fold 200 4 6 \
  tests/test_hopper_bwd.py -k "softcap_vs_reference"
FLASHTILE_HOPPER_BWD_OVERRIDES=softcap_fold=1 gpu_pytest pytest_softcap_fold_fixed 120 4 4 \
  tests/test_hopper_bwd_reduce.py -k "fixed_public_api"
timeout 240 python3 scripts/env_ab.py --softcap 30 \
  --ab "|$O=softcap_fold=1|$F=1|$F=1;$O=softcap_fold=1" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 1 --rounds 3 \
  --csv "$out/softcap_fold_ab.csv" >"$out/softcap_fold_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/softcap_fold_ab.log" | cut -c1-230
