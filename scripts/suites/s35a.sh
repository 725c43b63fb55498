# gpu_check.sh suite "s35a" (sourced; $out, $commit, ft() and status are set)
# Session 35: hd 256 forwards from 1k queries on stage C's persistent split ring without
# O buffers (K ring 2, V ring 3; `s33e` measured it +16-35% over stage A in bench_hopper).
# 1. GPU tests of the shipped hd 256 stage C: the public call at 1k-2k (persistent, paired;
#    odd causal tile counts on the one-shot ring of 2; windows, softcaps, MQA / GQA), the
#    config's own tests, stage C windows at hd 256, and the Gluon varlen forward at hd 256
#    (the one-shot grid's ring of 2).
# 2. The hd 256 rows of the perf table (flashtile bench, every backend, 3 rounds).
# 3. env_ab, Gemma-2's sliding layer (causal, window 4096, softcap 50) at 4k / 8k: shipped
#    against the one-shot C (what 8k ran before) and stage A (what 4k ran before).
# 4. env_ab, varlen hd 256 at 8k / 16k: shipped (the one-shot C's ring of 2) against stage
#    A (what it ran before).
# Predictions: the tests pass; hd 256 forward 0.97-1.0x cuDNN non-causal and 1.03-1.14x
# causal from 1k (s33e), forward+backward +6-10% (the forward is ~30% of it); Gemma-2
# forward +10-20% over A at 4k, +5-15% over the one-shot C at 8k; varlen -2..-5% (the
# one-shot C measured 3-4% below A densely).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hd256c 240 4 8 tests/test_hopper.py tests/test_varlen.py \
  -k "hd256_stage_c or no_o_stage_hd256 or (c_window and d256) or (varlen_hopper_gpu and 256) or (varlen_hopper_window_gpu and 256)"
ft bench --head-dims 256 --rounds 3 --commit "$commit" --csv "$out/bench_perf256.csv" \
  >"$out/bench_perf256.log" 2>&1 || status=1
grep -E "D256|matmul" "$out/bench_perf256.log" | grep -v "run/s" | grep -E "flashtile |cudnn|matmul" \
  | cut -c1-170
env_ab gemma 150 --ab "|FLASHTILE_HOPPER_C_PERSISTENT=0|FLASHTILE_HOPPER_SCHEDULE=A" \
  --head-dims 256 --seqlens 4096 8192 --causal 1 --window 4096 --softcap 50 --rounds 3
env_ab varlen256 150 --varlen --ab "|FLASHTILE_HOPPER_SCHEDULE=A" --head-dims 256 \
  --seqlens 8192 16384 --causal 0 1 --rounds 3
# 5. The shipped hd 256 split ring without the turn waits (FLASHTILE_HOPPER_C_PINGPONG=0):
#    s33e had the one-shot C 6-9% faster without them. Prediction: +3-8% (ratios to cuDNN
#    against the shipped config's in step 2's forward column).
FLASHTILE_HOPPER_C_PINGPONG=0 bench_fwd fwd256_nopp 120 "hd 256 shipped split ring, no turn waits" \
  --head-dims 256 --only "gluon-Cs*" sdpa-cudnn --rounds 3 \
  --cs-config num_stages=2,v_stages=3,o_stage=0
bench_fwd fwd256_pp 120 "hd 256 shipped split ring, with turn waits" \
  --head-dims 256 --only "gluon-Cs*" sdpa-cudnn --rounds 3 \
  --cs-config num_stages=2,v_stages=3,o_stage=0
