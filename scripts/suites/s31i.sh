# gpu_check.sh suite "s31i" (sourced; $out, $commit, ft() and status are set)
# Session 31: s31h's --a-config went to the gluon-A column (gluon-A* is the shipped A
# with its register cap toggled), so what it measured was: at hd 128 causal 1k stage A on
# 64-row, 64-key one-warpgroup tiles 366.3 TFLOPS against the shipped stage C (persistent,
# split ring, paired) 351.8 (+4.1%); at hd 64 causal 64-row tiles 257 / 317 at 1k / 2k,
# the shipped 128-row capped tiles not timed. Now each candidate in its own column run,
# 3 rounds, beside the shipped config:
#   hd 128 causal 1k / 2k: shipped C; A 64x64 w4 (ring 2, 3); A 64x128 w4
#   hd 64 causal 1k / 2k: shipped A (128x128 w8 capped); A 64x64 w4; A 64x128 w4 s3
# Prediction: hd 128 A 64x64 +2-5% at 1k, behind C at 2k; hd 64 the shipped tile best.
run_a() {  # TAG HEAD_DIM CONFIG
  timeout 100 python3 scripts/bench_hopper.py --head-dims "$2" --causal 1 \
    --seqlens 1024 2048 --only gluon-A gluon-Cs ${3:+--a-config "$3"} --rounds 3 \
    --csv "$out/fwd_$1.csv" >"$out/fwd_$1.log" 2>&1 || status=1
  echo "== $1: hd $2 gluon-A = ${3:-shipped A}"
  grep -E "MISMATCH|rror" "$out/fwd_$1.log" | head -3; grep -E "^B[0-9]+ S" "$out/fwd_$1.log" \
    | grep -vE "config|diff|ms " | cut -c1-120
}
run_a 128_a64x64 128 block_m=64,num_warps=4,block_n=64
run_a 128_a64x64s3 128 block_m=64,num_warps=4,block_n=64,num_stages=3
run_a 128_a64x128 128 block_m=64,num_warps=4
run_a 64_shipped 64 ""
run_a 64_a64x64 64 block_m=64,num_warps=4,block_n=64
run_a 64_a64x128s3 64 block_m=64,num_warps=4,num_stages=3
