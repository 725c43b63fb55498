# gpu_check.sh suite "s24a" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 23 after its device time ran out (CPU-checked: sm_90 builds, the add
# order's CPU test). HopperBwdConfig.reduce_ordered: the one-kernel backward with
# deterministic adds, for the default (deterministic) calls at hd 128 non-causal. Each
# 128-key program visits its head's query tiles rotated by pid_n * n_m / n_kt. Each
# query tile's adds wait their turn on a per-tile counter, in the order the programs
# reach it in lock step. A program releases its previous add once that add is complete
# (cp.async.bulk.wait_group 0, a step later), and the counter read a step early usually
# shows its turn (no wait). All of a head's programs must be resident (<= one key tile per
# SM), else the two-kernel backward runs. ptxas at hd 128: 255 registers, 148 B of spills
# (52 racing), 35 local stores + 35 loads per step (13 / 8 racing).
# 1. Its GPU tests: reference, NaN-filled buffers, bitwise repeat over 3 runs, ties,
#    GQA, the fallback.
# 2. A/B against the racing reduce and the two-kernel backward, 5 interleaved rounds.
#    Prediction: ordered 3-10% below racing at 4k / 16k (spills, one counter release and
#    read per step, the head-boundary programs waiting for siblings), still +3-8% over
#    the two-kernel backward at 8k / 16k; at 4k level with it.
# 3. forward+backward beside cuDNN with FLASHTILE_HOPPER_BWD_REDUCE_ORDERED=1 (deterministic
#    calls): prediction 0.92-0.95x cuDNN at hd 128 non-causal 4k / 16k (0.88x / 0.90x now).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s24a 200 4 8 tests/test_hopper_bwd_reduce.py -k "ordered"
R="dq_reduce=1,reduce_late=1,block_n=128,num_warps=8,prefetch_stats=0,max_regs=none"
timeout 120 python3 scripts/bench_hopper_bwd.py --ab "|$R|$R,reduce_ordered=1" --rounds 5 \
  --head-dims 128 --seqlens 1024 4096 8192 16384 --causal 0 \
  --csv "$out/ordered_ab.csv" >"$out/ordered_ab.log" 2>&1 || status=1
grep -A8 "^Gluon backward TFLOPS" "$out/ordered_ab.log" | cut -c1-140
grep -E "Error|Traceback" "$out/ordered_ab.log" | head -5
FLASHTILE_HOPPER_BWD_REDUCE_ORDERED=1 timeout 150 python3 -m flashtile.cli bench --rounds 3 \
  --causal no --head-dims 128 --seqlens 4096 16384 --backends flashtile flashtile-nd sdpa-cudnn \
  --commit "$commit" --csv "$out/bench_ordered.csv" >"$out/bench_ordered.log" 2>&1 || status=1
tail -n 12 "$out/bench_ordered.log"
