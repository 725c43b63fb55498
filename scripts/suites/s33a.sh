# gpu_check.sh suite "s33a" (sourced; $out, $commit, ft() and status are set)
# Written at the end of session 32 (device time spent), for the next session; CPU-checked
# only (bash -n; the kernels' sm_90 builds in tests/test_hopper_bwd.py). Windows and
# softcaps at hd 256 on the column-split Gluon backward (opt-in:
# FLASHTILE_HOPPER_BWD_HD256_MASKS=1; ptxas sm_90: dK/dV 233-253 registers, dQ 192-210,
# no spills), where the portable backward runs them today. Gemma-2's attention is hd 256
# with a softcap of 50 and 4096-key windows on half its layers.
# 1. GPU tests against the fp64 reference (32 cases: windows of 17-700 keys, caps 2 / 30,
#    MHA and MQA, ragged lengths).
# 2. The backward through the public call, opted in against not (scripts/env_ab.py, 3
#    interleaved rounds): Gemma-2's sliding layers (causal, window 4096, softcap 50) at 4k
#    / 8k, and a softcap alone (30) causal and not at 4k.
# Prediction: the tests pass; the backward +25-40% over the portable one, as without the
# masks (s32b / s32c: +31-40%), a little less with the softcap's tanh.
# If both hold, make it the default (hopper_bwd_problem_ok: drop the opt-in at hd 256).
source scripts/suites/lib/steps.sh
FLASHTILE_HOPPER_BWD_HD256_MASKS=1 gpu_pytest pytest_bwd256_masks 300 4 8 \
  tests/test_hopper_bwd.py -k "hd256_masks"
env_ab bwd256_gemma 200 --ab "FLASHTILE_HOPPER_BWD_HD256_MASKS=1|" --head-dims 256 \
  --seqlens 4096 8192 --causal 1 --softcap 50 --window 4096 --rounds 3
env_ab bwd256_softcap 150 --ab "FLASHTILE_HOPPER_BWD_HD256_MASKS=1|" --head-dims 256 \
  --seqlens 4096 --causal 0 1 --softcap 30 --rounds 3
