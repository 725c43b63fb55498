# gpu_check.sh suite "s33c" (sourced; $out, $commit, ft() and status are set)
# Written at the end of session 32 for the next session; CPU-checked only (bash -n; the
# sm_90 builds in tests/test_hopper.py). FA4's lazy rescale on stage A at hd 256
# (HopperFwdConfig.lazy_rescale, opt-in; ops/hopper_fwd._lazy_softmax_step): O and l are
# rescaled only in steps where some row's max grew by more than 2^8, decided once per
# program (a max over its rows: 2 more bar.sync per step). SASS (sm_90): the unmasked step
# is 437 instructions per warp, 130 of them FMUL (the O rescale, 128 registers); with the
# lazy rescale the path without it executes ~368, and 132 sit in the branch.
# Prediction: forward +4-8% at hd 256 (the rescale sits between the two GEMMs of a
# lock-step program; the scalar max costs two barriers back), level or a little below at
# 1k causal (more steps grow the max there).
# 1. GPU tests with it forced through the public call (FLASHTILE_HOPPER_FWD_OVERRIDES,
#    new in session 32): the hd 256 stage A cases (reference, windows, softcaps).
# 2. bench_hopper's gluon-A column with and without it (two processes, 3 rounds each).
source scripts/suites/lib/steps.sh
FLASHTILE_HOPPER_FWD_OVERRIDES=lazy_rescale=1 gpu_pytest pytest_lazy256 300 4 8 \
  tests/test_hopper.py -k "256 and (test_hopper_vs_reference or test_hopper_window_vs or test_hopper_softcap)"
for tag in lazy eager; do
  timeout 100 python3 scripts/bench_hopper.py --head-dims 256 --only gluon-A sdpa-cudnn \
    --rounds 3 $([ $tag = lazy ] && echo --a-config lazy_rescale=1) \
    --csv "$out/fwd256_$tag.csv" >"$out/fwd256_$tag.log" 2>&1 || status=1
  echo "== hd 256 stage A, $tag rescale"
  grep -E "MISMATCH|rror" "$out/fwd256_$tag.log" | head -3
  grep -E "^B[0-9]+ S" "$out/fwd256_$tag.log" | grep -vE "config|diff|ms " | cut -c1-110
done
