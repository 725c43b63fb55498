# gpu_check.sh suite "s23a" (sourced; $out, $commit, ft() and status are set)
# Session 23: the one-kernel backward of deterministic=False calls (HopperBwdConfig.
# dq_reduce, configs.hopper_bwd_reduce_config): the dK/dV kernel on 128 keys over two
# warpgroups (8 warps, one program per SM) also computes each tile pair's dQ = dS K from
# dS^T in shared memory and adds it to fp32 with a TMA reduce-add (5 GEMMs per tile pair
# instead of 7, no dQ kernel). First GPU run: its tests, then the backward beside the
# shipped two-kernel backward and cuDNN's.
# Prediction (ncu at 43480a0, hd 128 16k: dK/dV 6.27 + dQ 4.43 ms; the two-warpgroup dK/dV
# tiles measured 10-15% slower than one-warpgroup ones in e8aa9d8): the reduce kernel
# ~= 1.15 x 1.25 x 6.27 = 9.0 ms + the reduce traffic (~2 TB/s into L2 at that rate), so
# hd 128 non-causal backward +10-20% over the two-kernel one (~0.80x -> 0.90-0.95x cuDNN's
# backward); causal +5-15% (108 B of spills in the band step); hd 64 -10% to +10% (one
# 8-warp program per SM against three capped ones).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s23a 220 8 8 tests/test_hopper_bwd_reduce.py
timeout 240 python3 scripts/bench_hopper_bwd.py --head-dims 128 64 --seqlens 4096 16384 \
  --causal 0 1 --only gluon-bwd gluon-reduce ft-fwd+gluon ft-fwd+reduce \
  --csv "$out/reduce.csv" >"$out/reduce.log" 2>&1 || status=1
grep -A12 "^backward TFLOPS" "$out/reduce.log"
grep -E "MISMATCH|FAILED|Error|rel\|x" "$out/reduce.log" | cut -c1-220 | head -12
