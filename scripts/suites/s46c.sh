# gpu_check.sh suite "s46c" (sourced; $out, $commit, ft() and status are set)
# Session 46 ran these two A/Bs as direct env_ab.py calls on the warm machine after s46b
# (written down here afterwards, for a rerun; the second ran causal too and stopped there:
# dq_rotate is non-causal only). The one-kernel fixed-point backward's shipped flags at
# hd 128 against their alternatives, by sustained timing (s46a: the steadiest between
# runs): a second dQ staging tile (dq_stage2, opt-in), the rotated query tiles
# (dq_rotate, withdrawn in step 92 at -1% / -2% by do_bench), and the previous step's dQ
# added under this one's S^T (reduce_late, shipped). Backward alone, 2 rounds, 2 s
# sustained. No prediction was written before the run.
source scripts/suites/lib/steps.sh
env_ab envab_s46c_stage2 300 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=dq_stage2=0|FLASHTILE_HOPPER_BWD_OVERRIDES=dq_stage2=1" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 1 --measures bwd --rounds 2 --sustained 2
env_ab envab_s46c_rot 300 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=dq_rotate=0|FLASHTILE_HOPPER_BWD_OVERRIDES=dq_rotate=1|FLASHTILE_HOPPER_BWD_OVERRIDES=reduce_late=0" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 --measures bwd --rounds 2 --sustained 2
