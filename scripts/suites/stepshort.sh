# gpu_check.sh suite "stepshort" (sourced; $out, $commit, ft() and status are set)
# The MiniGPT training step (train --bench, dropout 0.2) with the one-launch
# short-sequence backward off and on: since session 9 the bench interleaves the backends
# in rounds (median of round means; ratio = median of per-round ratios) and times
# variants of one backend through NAME@VAR=VALUE, so both run in the same rounds beside
# SDPA cuDNN (ec35cb1 timed them in separate processes: cuDNN's own step moved 10.7-14.3
# ms within the run). ~3 min.
timeout 240 python3 -m flashtile.cli train --bench --bench-rounds 10 --bench-steps 100 \
  --bench-backends flashtile,flashtile@FLASHTILE_BWD_SHORT=1,sdpa-cudnn \
  --bench-shapes 64x256,16x1024 --csv "$out/train_bench_rounds.csv" \
  >"$out/train_bench_rounds.log" 2>&1 || status=1
cat "$out/train_bench_rounds.log" | head -n 12
