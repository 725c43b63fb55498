# gpu_check.sh suite "bwdcap" (sourced; $out, $commit, ft() and status are set)
# The dK/dV kernel is 2/3 of the Gluon backward and keeps the tensor pipe 46% busy at
# hd 64 (67% at hd 128) against the dQ kernel's 70% (83%) (`ncubwd`, 488f557), its warps
# stalled on long-scoreboard loads (the per-step lse / delta) and with 2 programs per SM.
# Candidates, compiled on the CPU first (ptxas, 2026-11-30): lse / delta loaded one step
# ahead (prefetch_stats: hd 64 180 / 194 regs, hd 128 251 / 255 + 60 B spills causal);
# a 168-register cap at hd 64 (3 dK/dV programs per SM; 20 B / 52 B spills); hd 64 dQ ring
# 2 (122 regs, 48 KB: 4 programs); hd 128 dQ with 32-key tiles (126 regs, 64 KB: 3).
source scripts/suites/lib/bwd_sweep.sh
bwd_sweep 64 "1024 4096 16384" "gluon-bwd" "" "prefetch_stats=1" "max_regs=168" \
  "dq_num_stages=2" "prefetch_stats=1,dq_num_stages=2"
bwd_sweep 128 "1024 4096 16384" "gluon-bwd" "" "prefetch_stats=1" "dq_block_n=32"
