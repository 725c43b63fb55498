# gpu_check.sh suite "bwd128sweep" (sourced; $out, $commit, ft() and status are set)
# One-warpgroup tiles of the Gluon backward at hd 128 (two programs per SM, as the hd 64
# tiles of session 5), beside the shipped two-warpgroup ones. Candidates compiled on the
# CPU (2026-11-30, ptxas, regs / smem): dK/dV 64 keys x 32 rows ring 2 200 (causal 221) /
# 64 KB, 64 x 64 ring 2 240 / 96 KB (causal 255 + 28 B spills); dQ 64 x 64 ring 2 164 /
# 96 KB. Not yet run.
source scripts/suites/lib/bwd_sweep.sh
bwd_sweep 128 "1024 4096 16384" "gluon-bwd portable-bwd" "" \
  "block_m=32,block_n=64,num_warps=4,num_stages=2,dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=2" \
  "block_m=64,block_n=64,num_warps=4,num_stages=2,dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=2" \
  "dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=2"
