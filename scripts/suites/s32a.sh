# gpu_check.sh suite "s32a" (sourced; $out, $commit, ft() and status are set)
# Written at the end of session 31 (device time spent), for the next session; CPU-checked
# only (bash -n). What session 31 left open around the short causal tile
# (configs.HD128_CAUSAL_SHORT_A_MAX: hd 128 causal below 2k queries on stage A 64 x 64):
# 1. The varlen Gluon forward on the short tile (reached only when forced below 4k:
#    FLASHTILE_HOPPER_VARLEN=1), never run on the GPU: the varlen GPU tests with it forced.
# 2. The short tile where nothing measured it (scripts/bench_hopper.py, 3 rounds, the
#    gluon-A column with --a-config beside the portable kernel and cuDNN):
#      hd 128 causal 256 (shipped now: the short tile; was the 128-row A);
#      hd 128 non-causal 512 (shipped: portable; 295 against A 266 at 836b108);
#      hd 64 causal 512 (shipped: portable; the capped 128-row A unmeasured there).
#    Predictions: hd 128 causal 256 short tile >= the 128-row tiles (+10-30%, as at 512);
#    hd 128 non-causal 512 64 x 64 A within +-10% of portable; hd 64 causal 512 64 x 64 A
#    +5-20% over portable.
# 3. Then the perf table at this commit (the README's is 7db4c84's): run this suite as
#    `gpu_check.sh s32a,perf COMMIT`.
source scripts/suites/lib/steps.sh
FLASHTILE_HOPPER_VARLEN=1 gpu_pytest pytest_varlen_short 200 4 6 tests/test_varlen.py \
  -k "hopper or gluon"
run_a() {  # TAG HEAD_DIM CAUSAL SEQLEN CONFIG
  timeout 100 python3 scripts/bench_hopper.py --head-dims "$2" --causal "$3" --seqlens "$4" \
    --only gluon-A portable ${5:+--a-config "$5"} --rounds 3 --csv "$out/fwd_$1.csv" \
    >"$out/fwd_$1.log" 2>&1 || status=1
  echo "== $1: hd $2 causal $3 S $4 gluon-A = ${5:-its config}"
  grep -E "MISMATCH|rror" "$out/fwd_$1.log" | head -3
  grep -E "^B[0-9]+ S" "$out/fwd_$1.log" | grep -vE "config|diff|ms " | cut -c1-110
}
run_a 128c_256_short 128 1 256 ""
run_a 128c_256_rows128 128 1 256 block_m=128,num_warps=8,block_n=128
run_a 128n_512_a64 128 0 512 block_m=64,num_warps=4,block_n=64
run_a 64c_512_capped 64 1 512 ""
run_a 64c_512_a64 64 1 512 block_m=64,num_warps=4,block_n=64
