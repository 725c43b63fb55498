# gpu_check.sh suite "s32c" (sourced; $out, $commit, ft() and status are set)
# Session 32, after s32b (the column-split hd 256 dK/dV kernel: Gluon backward 280-322
# TFLOPS against the portable 164-237, +36-39%; dK/dV 2.48 ms + dQ 1.73 ms at hd 256
# non-causal 4k). Shipped with it: the Gluon backward at hd 256 from 1k keys
# (configs.hopper_bwd_preferred), the dQ kernel split the same way (dq_col_split: 8
# warps, 64 x 64 tiles; ptxas 196 / 191 regs, no spills, 200 KB) and, from s32a, the
# forward's 64 x 64 stage A tiles at hd 128 non-causal / hd 64 causal from 512 to 1k
# queries (configs.SHORT_A_MIN). Predictions:
#  - dq_col_split against the 4-warp 64 x 32 dQ kernel: the dQ kernel 10-25% faster (two
#    warpgroups share each step's elementwise pause), the backward +4-10%;
#  - hd 256 at 512 keys: the Gluon backward ahead of the portable one by 20-35% (as at 1k);
#  - through the public call (flashtile bench, 3 rounds): hd 256 forward+backward
#    0.80-0.85x cuDNN (0.64-0.72x at 1b99241); hd 128 non-causal 512 forward +25-35%,
#    hd 64 causal 512 forward +10-15% over the perf run's portable numbers.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_bwd256 300 4 8 tests/test_hopper_bwd.py -k "d256 or 256]"
gpu_pytest pytest_short 300 4 6 tests/test_hopper.py -k "short_causal_tile or schedule"
FLASHTILE_HOPPER_BWD=1 validate_covering_tail covering_bwd256_forced 150 1 256
timeout 200 python3 scripts/bench_hopper_bwd.py --head-dims 256 --seqlens 1024 4096 16384 \
  --ab "|dq_block_n=32,dq_num_warps=4,dq_col_split=0" --rounds 3 \
  --csv "$out/bwd256_dq_ab.csv" >"$out/bwd256_dq_ab.log" 2>&1 || status=1
grep -vE "^\s*$" "$out/bwd256_dq_ab.log" | tail -n 9 | cut -c1-150
timeout 100 python3 scripts/bench_hopper_bwd.py --head-dims 256 --seqlens 512 \
  --only gluon-bwd portable-bwd cudnn-fwd cudnn-fwd+bwd --csv "$out/bwd256_512.csv" \
  >"$out/bwd256_512.log" 2>&1 || status=1
grep -E "MISMATCH|rror" "$out/bwd256_512.log" | head -3
tail -n 4 "$out/bwd256_512.log" | cut -c1-150
echo "== public call: hd 256, and the 512 forward cells"
ft bench --head-dims 256 --rounds 3 --backends flashtile sdpa-cudnn --commit "$commit" \
  --csv "$out/bench_hd256.csv" >"$out/bench_hd256.log" 2>&1 || status=1
tail -n 14 "$out/bench_hd256.log" | cut -c1-160
ft bench --head-dims 64 128 --seqlens 512 --rounds 3 --backends flashtile sdpa-cudnn \
  --commit "$commit" --csv "$out/bench_512.csv" >"$out/bench_512.log" 2>&1 || status=1
tail -n 10 "$out/bench_512.log" | cut -c1-160
