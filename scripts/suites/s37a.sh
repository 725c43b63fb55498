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
# 3. On an H200 only: the hd 256 rows of the perf table (as s32e) at the commit with the
#    turn waits off non-causal (6b029a5 and later), to refresh the README.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_noo 200 4 4 tests/test_hopper.py -k "split_no_o_stage"
noo="FLASHTILE_HOPPER_FWD_OVERRIDES=num_stages=3,v_stages=3,o_stage=0,persistent=1,paired=1"
env_ab fwd_noo128 200 --ab "|$noo" --measures fwd --head-dims 128 \
  --seqlens 1024 4096 16384 --causal 0 --rounds 3
env_ab fwd_noo128c 200 --ab "|$noo" --measures fwd --head-dims 128 \
  --seqlens 4096 8192 16384 --causal 1 --rounds 3
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  ft bench --head-dims 256 --rounds 3 --commit "$commit" --csv "$out/bench_perf256.csv" \
    >"$out/bench_perf256.log" 2>&1 || status=1
  grep -E "D256|matmul" "$out/bench_perf256.log" | grep -v "run/s" \
    | grep -E "flashtile |cudnn|matmul" | cut -c1-170
else
  echo "== not an H200: hd 256 perf rows skipped"
fi
