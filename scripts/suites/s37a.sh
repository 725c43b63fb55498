# gpu_check.sh suite "s37a" (sourced; $out, $commit, ft() and status are set)
# Session 37: hd 128 stage C on the persistent split ring without the O buffers
# (o_stage=False; O through the Q tile, as hd 256 ships since session 35): K ring 3 /
# V ring 3 in 224 KB (229800 bytes compiled, 168 registers, 12 / 24 bytes spilled).
# 1. GPU tests: the split ring without O buffers at hd 128 and 256, NaN-poisoned.
# 2. env_ab forward alone, interleaved, 3 rounds: shipped against K3 V3 without O
#    (persistent, paired when causal). Shipped is the split ring with O (K2 V3 non-causal,
#    K3 V2 paired causal) below 16k and the one-shot ring of 3 at 16k.
#    Prediction: non-causal +0-2% at 1k-4k (one more K slot; V already 3 deep), +1-3% at
#    16k over the one-shot C (the V ring depth was hd 256's lever); causal +1-4% at 4k/8k
#    (V ring 2 -> 3), level or below at 16k (the paired order lost there before).
# (The hd 256 perf rows it also ran on an H200 moved to a full `perf` run, session 39.)
source scripts/suites/lib/steps.sh
gpu_pytest pytest_noo 200 4 4 tests/test_hopper.py -k "split_no_o_stage"
noo="FLASHTILE_HOPPER_FWD_OVERRIDES=num_stages=3,v_stages=3,o_stage=0,persistent=1,paired=1"
env_ab fwd_noo128 200 --ab "|$noo" --measures fwd --head-dims 128 \
  --seqlens 1024 4096 16384 --causal 0 --rounds 3
env_ab fwd_noo128c 200 --ab "|$noo" --measures fwd --head-dims 128 \
  --seqlens 4096 8192 16384 --causal 1 --rounds 3
