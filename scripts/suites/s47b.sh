# gpu_check.sh suite "s47b" (sourced; $out, $commit, ft() and status are set)
# The causal hd 128 one-kernel backward tile-major in blocks of 4 heads at 4k
# (configs.REDUCE_TILE_MAJOR_CAUSAL, shipped from s47a): its GPU test (bitwise equal to
# the head-major launch), the `floor` suite, then `perf`'s table.
# Prediction: hd 128 causal 4k forward+backward ~0.95x cuDNN sustained (0.937-0.942x
# before), every other cell within the 0.7% sustained agreement of session 46's.
source scripts/suites/lib/steps.sh
# The floor first (the device time left this session is short), then perf's table.
gpu_pytest pytest_tile_blocks 120 2 4 tests/test_hopper_bwd_reduce.py -k "causal_tile_major_blocks"
source scripts/suites/floor.sh
FLOOR_DONE=1
source scripts/suites/perf.sh
