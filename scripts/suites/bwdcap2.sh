# gpu_check.sh suite "bwdcap2" (sourced; $out, $commit, ft() and status are set)
# Probes past the shipped caps (ptxas on the CPU, 2026-11-30): hd 64 dK/dV at 128
# registers (four programs per SM; 448 / 664 B of spills) and hd 128 dK/dV with 32-row
# Q/dO tiles at 168 registers (three programs per SM; 284 / 668 B of spills).
source scripts/suites/lib/bwd_sweep.sh
bwd_sweep 64 "1024 4096 16384" "gluon-bwd" "" "max_regs=128"
bwd_sweep 128 "1024 4096 16384" "gluon-bwd" "" "block_m=32,max_regs=168"
