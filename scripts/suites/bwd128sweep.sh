# gpu_check.sh suite "bwd128sweep" (sourced; $out, $commit, ft() and status are set)
# One-warpgroup tiles of the Gluon backward at hd 128 (two programs per SM, as the hd 64
# tiles of session 5), beside the shipped two-warpgroup ones. Candidates compiled on the
# CPU (2026-11-30, ptxas, regs / smem): dK/dV 64 keys x 32 rows ring 2 200 (causal 221) /
# 64 KB, 64 x 64 ring 2 240 / 96 KB (causal 255 + 28 B spills); dQ 64 x 64 ring 2 164 /
# 96 KB. Not yet run.
for cfg in "" \
  "block_m=32,block_n=64,num_warps=4,num_stages=2,dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=2" \
  "block_m=64,block_n=64,num_warps=4,num_stages=2,dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=2" \
  "dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=2"; do
  tag=$(echo "${cfg:-shipped}" | md5sum | cut -c1-6)
  python3 scripts/bench_hopper_bwd.py --head-dims 128 --seqlens 1024 4096 16384 \
    --only gluon-bwd portable-bwd ${cfg:+--config "$cfg"} --csv "$out/bwd128_$tag.csv" \
    >"$out/bwd128_$tag.log" 2>&1 || echo "config $tag failed (see log)"
  echo "== ${cfg:-shipped} ($tag)"
  grep -E "MISMATCH|FAILED" "$out/bwd128_$tag.log" | head -3
  tail -n 7 "$out/bwd128_$tag.log" | cut -c1-80
done
