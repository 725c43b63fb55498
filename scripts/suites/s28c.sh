# gpu_check.sh suite "s28c" (sourced; $out, $commit, ft() and status are set)
# HopperBwdConfig.one_loop: s28a's ncu read the causal one-kernel backward (fixed-point
# dQ, hd 128, 16k) at 8.55 GB of local loads, tensor pipe 43% against 58% non-causal,
# long_scoreboard the top stall. nvdisasm of a build with the launch's int
# specialisation: the unmasked loop after the band's reloads 25 spilled values per step
# (mostly 64-bit wgmma descriptors); one loop with the mask on every step (one_loop=1)
# has none, one loop with the mask behind a band branch (=2) two.
# 1. GPU tests: tests/test_hopper_bwd_reduce.py -k one_loop (two-kernel, fixed, racing;
#    one_loop 1 / 2; bitwise equal to the two-loop builds where deterministic).
# 2. A/B through the public call (scripts/env_ab.py, 3 interleaved rounds), causal hd 128
#    / 64 at 4k / 16k: the two-kernel default, it with one_loop=1 / 2, the fixed-point
#    one-kernel (two loops, then one_loop=1 / 2).
# Prediction: the one-kernel with one_loop=1 +20-35% over its two-loop build, reaching
# the two-kernel backward at 4k and +3-8% above it at hd 128 16k; one_loop=2 between;
# the two-kernel backward with one loop level (+-2%: it does not spill either way).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_one_loop 200 4 6 tests/test_hopper_bwd_reduce.py -k one_loop
O=FLASHTILE_HOPPER_BWD_OVERRIDES
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED
timeout 330 python3 scripts/env_ab.py \
  --ab "|$O=one_loop=1|$O=one_loop=2|$F=1|$F=1;$O=one_loop=1|$F=1;$O=one_loop=2" \
  --head-dims 128 64 --seqlens 4096 16384 --causal 1 --rounds 3 \
  --csv "$out/one_loop_ab.csv" >"$out/one_loop_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/one_loop_ab.log" | cut -c1-230
