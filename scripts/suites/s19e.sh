# gpu_check.sh suite "s19e" (sourced; $out, $commit, ft() and status are set)
# The hd 64 dK/dV kernel with dropout capped at 168 registers (three programs per SM, as
# the build without dropout; ptxas: 296 B of spills in the step loop) against uncapped
# (238 registers, two per SM), through FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=168.
source scripts/suites/lib/steps.sh
# Prediction: dK/dV 103 us at 16 x 1024 -> 90-110 (more warps to hide latency against
# the spills' local-memory traffic); the step moves with it by at most +-0.1 ms.
dropout_kernels drop_k_cap168 FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=168 -- --backends flashtile
graph_step train_bench_cap \
  "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=168,sdpa-cudnn:graph"
