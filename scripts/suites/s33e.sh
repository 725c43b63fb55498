# gpu_check.sh suite "s33e" (sourced; $out, $commit, ft() and status are set)
# Session 33, CPU-checked only (bash -n; the configs compile for sm_90). The hd 256 forward
# after s33b: stage A (128 x 64 tiles, both warpgroups in lock step) is at 60.8% tensor
# pipe against cuDNN's 78.8%, and its top stall is the refill's CTA barrier (41% of the
# stall cycles); the lazy rescale's two extra CTA barriers cost 6-9% (s33c).
# 1. Stages A, B and C side by side at hd 256 (bench_hopper, 3 rounds). B: a 1-warp
#    producer and mbarrier slots, the consumers issuing S of tile t+1 before the softmax
#    of tile t (FA3's intra-warpgroup overlap), but still one 8-warp partition with a CTA
#    barrier before each slot's release; never measured at hd 256 (ptxas 168 launch
#    registers, no spills). C: FA3's ping-pong (514 / 503 against A's 532 / 531 at 4k /
#    16k in earlier sessions).
# 2. Stage A on 128-key tiles with a ring of 1 (cuDNN's 64 x 128 per warpgroup; half the
#    softmax phases and refill barriers per FLOP; ptxas 255 registers, 40 / 104 B spilled
#    non-causal / causal; each tile's K / V load exposed after the step: no prefetch).
# 3. Stage C on the persistent grid's split ring at hd 256: as built (gluon-Cs: K ring 2,
#    V ring 1, O buffers) and with K ring 2 / V ring 3 and O through the Q tile
#    (HopperFwdConfig.o_stage=False, new: 224 KB; the one-shot C's ring of 2 leaves TMA
#    half a tile of lead, as at hd 128 where a ring of 3 won), after its GPU tests; and
#    stage C without the turn waits (FLASHTILE_HOPPER_C_PINGPONG=0).
# 4. ncu of stages B and C at hd 256 non-causal 4k (as s33b's stage A): tensor pipe and
#    the CTA-barrier stall.
# Predictions: B within +-5% of A (the overlap against the same lock step); A on 128-key
# tiles -5% to -15% (the exposed loads outweigh the halved barriers); C's ncu shows the
# tensor pipe below A's and stalls on its mbarrier waits (why it loses here is the question);
# the K 2 / V 3 ring +3-8% over the one-shot C (the deeper V lead), so about level with A.
source scripts/suites/lib/steps.sh
bench_fwd fwd256_abc 150 "hd 256 forward: stages A, B, C" --head-dims 256 \
  --only gluon-A gluon-B gluon-C sdpa-cudnn --rounds 3
bench_fwd fwd256_a128 100 "hd 256 stage A on 128-key tiles, ring 1" --head-dims 256 \
  --only gluon-A sdpa-cudnn --rounds 3 --a-config block_n=128,num_stages=1
gpu_pytest pytest_noo 200 4 8 tests/test_hopper.py -k "no_o_stage"
bench_fwd fwd256_cs 120 "hd 256: A, persistent C (K2 V1 + O buffers), C K2 V3 without O buffers (Cs*)" \
  --head-dims 256 --only gluon-A gluon-Cs "gluon-Cs*" sdpa-cudnn --rounds 3 \
  --cs-config num_stages=2,v_stages=3,o_stage=0
FLASHTILE_HOPPER_C_PINGPONG=0 bench_fwd fwd256_c_nopp 100 "hd 256: A, C without the turn waits" \
  --head-dims 256 --only gluon-A gluon-C sdpa-cudnn --rounds 3
for sched in B C; do
  FLASHTILE_HOPPER_SCHEDULE=$sched timeout 150 ncu --clock-control none \
    --kernel-name "regex:_fwd" --launch-skip 2 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis \
    python3 scripts/ncu_fwd.py --head-dim 256 --seqlen 4096 \
    >"$out/ncu256_$sched.txt" 2>&1 || { echo "ncu $sched failed"; status=1; }
  echo "== stage $sched"
  grep -E "^  [A-Za-z_].*\(|Duration|Registers Per|highest-utilized|Issue Slots Busy|Warp Cycles Per Issued|sibling warps|Achieved Active" \
    "$out/ncu256_$sched.txt" | head -n 12 | cut -c1-150
done
