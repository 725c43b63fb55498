# gpu_check.sh suite "bwdcap" (sourced; $out, $commit, ft() and status are set)
# One more resident program per SM in the Gluon backward (register caps via
# HopperBwdConfig.max_regs / dq_max_regs, or smaller rings/tiles), beside the shipped
# tiles. Compiled on the CPU first (ptxas, 2026-11-30): hd 64 dK/dV capped at 168 regs
# (3 programs: 3 x 128 x 168 <= 64K) spills 20 B (causal 52 B); hd 64 dQ ring 2, 122 regs,
# 48 KB (4 programs); hd 128 dQ with 32-key K/V tiles, 126 regs, 64 KB (3 programs).
source scripts/suites/lib/bwd_sweep.sh
bwd_sweep 64 "1024 4096 16384" "gluon-bwd" "" "max_regs=168" "dq_num_stages=2" \
  "max_regs=168,dq_num_stages=2"
bwd_sweep 128 "1024 4096 16384" "gluon-bwd" "" "dq_block_n=32"
