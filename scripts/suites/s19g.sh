# gpu_check.sh suite "s19g" (sourced; $out, $commit, ft() and status are set)
# The dropout partition (FLASHTILE_HOPPER_DROPOUT_WS=1, opt-in: s18f measured it +15%
# against the consumers drawing) again, with the 16-bit draw: half the Philox calls per
# step for its 4 warps (one per scheduler; 16 calls per thread and 128 x 128 tile, was
# 32). Prediction: the partition now keeps ahead of the consumers (~1000 integer
# instructions a step against ~4500 cycles of consumer step at 16 x 1024), so the
# training forward 95.5 -> 70-85 us at 16 x 1024 and 46.7 -> 38-45 at 64 x 256.
source scripts/suites/lib/steps.sh
dropout_kernels drop_k_ws FLASHTILE_HOPPER_DROPOUT_WS=1 -- --backends flashtile
graph_step train_bench_ws "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_DROPOUT_WS=1,sdpa-cudnn:graph"
