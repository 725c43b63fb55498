# gpu_check.sh suite "nextab" (sourced; $out, $commit, ft() and status are set)
# Two A/Bs prepared in session 5, not yet run:
# 1. the low 1k rows of the 18-shape bench: all shapes with and without a 300 ms settle
#    loop before each timing (`bench --settle-ms`), flashtile and cuDNN only;
# 2. one-warpgroup stage A at hd 128 (64 x 64 tiles, 123 regs, 112 / 80 KB: two programs
#    per SM) against stage C, non-causal 4k / 16k.
for settle in 0 300; do
  ft bench --backends flashtile sdpa-cudnn --settle-ms "$settle" --commit "$commit" \
    --csv "$out/bench_settle$settle.csv" >"$out/bench_settle$settle.log" 2>&1 || status=1
  echo "== settle $settle ms"; grep -E "S1024" "$out/bench_settle$settle.log" | grep flashtile
done
for a in "block_m=64,num_warps=4,block_n=64,num_stages=3" \
         "block_m=64,num_warps=4,block_n=64,num_stages=2"; do
  python3 scripts/bench_hopper.py --head-dims 128 --seqlens 4096 16384 --causal 0 \
    --only gluon-C gluon-A --a-config "$a" >"$out/fwd128a_${a//[=,]/_}.log" 2>&1 || status=1
  echo "== stage A $a"; tail -n 3 "$out/fwd128a_${a//[=,]/_}.log"
done
