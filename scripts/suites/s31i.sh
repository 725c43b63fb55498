# gpu_check.sh suite "s31i" (sourced; $out, $commit, ft() and status are set)
# Session 31: s31h read stage A ahead of the shipped stage C (persistent, split ring,
# paired) at hd 128 causal 1k, 366.3 against 351.8 TFLOPS (+4.1%; s21b had A at 320 and
# C paired at 355). Through the public call, as the perf table times it: `flashtile
# bench` forward, hd 128 causal 1k / 2k, 5 rounds, the shipped table against
# FLASHTILE_HOPPER_SCHEDULE=A, twice each, interleaved by process.
# Prediction: A +2-5% at 1k, -10% or worse at 2k (s21b: 388 against 473).
for run in 1 2; do
  for v in default A; do
    env $([ "$v" = A ] && echo FLASHTILE_HOPPER_SCHEDULE=A) timeout 100 python3 -m flashtile.cli \
      bench --seqlens 1024 2048 --head-dims 128 --causal yes --no-bwd \
      --backends flashtile sdpa-cudnn --rounds 5 --commit "$commit" \
      --csv "$out/sched_${v}_$run.csv" >"$out/sched_${v}_$run.log" 2>&1 || status=1
    echo "== $v run $run"; grep -E "^\| 128" "$out/sched_${v}_$run.log" | cut -c1-120
  done
done
