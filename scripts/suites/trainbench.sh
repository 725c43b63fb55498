# gpu_check.sh suite "trainbench" (sourced; $out, $commit, ft() and status are set)
# The MiniGPT training-step bench alone (host-bound: run it when nothing else loads the
# host), flashtile vs SDPA cuDNN / flash, with the profiler table.
ft train --bench --bench-backends flashtile,sdpa-cudnn,sdpa-flash \
  --bench-shapes 64x256,16x1024 --bench-profile --csv "$out/train_bench.csv" \
  >"$out/train_bench.log" 2>&1 || status=1
grep -A 8 "^MiniGPT training step" "$out/train_bench.log"
