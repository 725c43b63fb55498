# gpu_check.sh suite "s18f" (sourced; $out, $commit, ft() and status are set)
# The dropout partition (FLASHTILE_HOPPER_DROPOUT_WS=1): 4 warps beside stage A's two
# consumer warpgroups draw each step's decisions and write its bit blocks, handing the
# steps over on an mbarrier ring (2 slots); the consumers read the blocks one word per
# lane with the warp transpose. First GPU run (a hang is cut by the step limits).
# 1. The Gluon dropout forward's tests, now with the partition ("bits-ws", and through
#    autograd with the Gluon backward).
# 2. Per kernel and the graphed MiniGPT step, the partition against the consumers
#    drawing (the default) and cuDNN. Prediction (SASS sm_90: consumer step loop 725
#    instructions against 1434 drawing, 461 without dropout; the partition's 1582-1706
#    per step, integer work that overlaps the consumers'): the forward 121.5 -> 70-90 us
#    at 16 x 1024 and 56.2 -> 35-45 at 64 x 256; the step 8.06 -> 7.75-7.9 ms and 6.99 ->
#    6.85-6.95.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hopper_dropout 120 4 6 tests/test_hopper_dropout.py
for ws in 1 0; do
  dropout_kernels "drop_k_ws$ws" FLASHTILE_HOPPER_DROPOUT_WS=$ws
done
graph_step train_bench "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_DROPOUT_WS=1,sdpa-cudnn:graph"
