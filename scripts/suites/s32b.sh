# gpu_check.sh suite "s32b" (sourced; $out, $commit, ft() and status are set)
# Session 32: the hd 256 dK/dV kernel with the warpgroups splitting the columns
# (HopperBwdConfig.col_split, now hopper_bwd_config's hd 256 tiles; the Gluon backward at
# hd 256 stays opt-in, FLASHTILE_HOPPER_BWD=1). One launch of 8 warps over 64 keys: S^T
# and dP^T computed once (each warpgroup 32 of the 64 query columns, wgmma m64n32),
# P^T / dS^T through shared memory, each warpgroup 128 of dK's / dV's columns (m64n128).
# Before it: two 4-warp launches of 128 columns each, both recomputing S^T and dP^T (1.5x
# the dK/dV GEMMs). ptxas sm_90: 219 / 255 regs, 0 / 100 B spills, 208 KB.
# Prediction: the dK/dV kernel 1.3-1.5x faster than the two launches (one GEMM in three
# fewer, but the m64n32 S^T / dP^T GEMMs read 1.5x the shared memory the tensor cores
# can take, and one program per SM has no overlap); the Gluon backward 200-250 TFLOPS,
# within +-10% of the portable backward (206-239 at 0e01b69).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_bwd256 300 4 8 tests/test_hopper_bwd.py -k "d256 or 256]"
timeout 240 python3 scripts/bench_hopper_bwd.py --head-dims 256 --seqlens 1024 4096 16384 \
  --only gluon-bwd portable-bwd cudnn-fwd cudnn-fwd+bwd --csv "$out/bwd256_cols.csv" \
  >"$out/bwd256_cols.log" 2>&1 || status=1
grep -E "MISMATCH|FAILED|rror" "$out/bwd256_cols.log" | head -5
tail -n 8 "$out/bwd256_cols.log" | cut -c1-150
# the two column-block launches against col_split, interleaved (Gluon backward only)
timeout 150 python3 scripts/bench_hopper_bwd.py --head-dims 256 --seqlens 4096 16384 \
  --ab "|block_m=32,num_warps=4,d_split=2,col_split=0" --rounds 3 \
  --csv "$out/bwd256_ab.csv" >"$out/bwd256_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/bwd256_ab.log" | tail -n 12 | cut -c1-150
# per kernel (torch profiler): the Gluon backward's kernels, then the portable ones
for mode in 1 0; do
  echo "== kernels, FLASHTILE_HOPPER_BWD=$mode"
  FLASHTILE_HOPPER_BWD=$mode DIAG_HOST=0 timeout 90 python3 scripts/diag_fwd_bwd.py \
    4,4096,8,256,0 4,4096,8,256,1 >"$out/bwd256_kernels_$mode.log" 2>&1 || status=1
  grep -vE "^\s*$" "$out/bwd256_kernels_$mode.log" | grep -vi "gap" | cut -c1-140 | head -n 24
done
