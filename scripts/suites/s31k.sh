# gpu_check.sh suite "s31k" (sourced; $out, $commit, ft() and status are set)
# Session 31: after the 64 x 64 stage A tile took hd 128 causal 1k-2k (s31j), the same
# question at the neighbouring short causal cells (scripts/bench_hopper.py, 3 rounds, the
# gluon-A column with --a-config against the shipped config in the same run):
#   hd 128 causal 512 (shipped A 128 x 128 w8 ring 2): A 64 x 64 w4 ring 2
#   hd 128 causal 1k (shipped now A 64 x 64 ring 2): 64 x 32 ring 3
#   hd 256 causal 1k (shipped A 128 x 64 w8 ring 2, 0.82x): A 64 x 64 w4 ring 2
# Prediction: 512 +3-8% (4 query tiles per head: 64-row tiles double the programs);
# 64 x 32 at 1k -5% (the S tile's n of 32 halves each wgmma); hd 256 64 x 64 -5% to +5%
# (164 KB: one program per SM).
run_a() {  # TAG HEAD_DIM SEQLEN CONFIG
  timeout 100 python3 scripts/bench_hopper.py --head-dims "$2" --causal 1 --seqlens "$3" \
    --only gluon-A ${4:+--a-config "$4"} --rounds 3 --csv "$out/fwd_$1.csv" \
    >"$out/fwd_$1.log" 2>&1 || status=1
  echo "== $1: hd $2 S $3 gluon-A = ${4:-shipped}"
  grep -E "MISMATCH|rror" "$out/fwd_$1.log" | head -3
  grep -E "^B[0-9]+ S" "$out/fwd_$1.log" | grep -vE "config|diff|ms " | cut -c1-100
}
run_a 128_512_shipped 128 512 ""
run_a 128_512_a64 128 512 block_m=64,num_warps=4,block_n=64
run_a 128_1k_a64x32 128 1024 block_n=32,num_stages=3
run_a 256_1k_shipped 256 1024 ""
run_a 256_1k_a64 256 1024 block_m=64,num_warps=4,block_n=64
