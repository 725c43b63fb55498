# gpu_check.sh suite "s19e" (sourced; $out, $commit, ft() and status are set)
# The hd 64 dK/dV kernel with dropout capped at 168 registers (three programs per SM, as
# the build without dropout; ptxas: 296 B of spills in the step loop) against uncapped
# (238 registers, two per SM), through FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=168.
# Prediction: dK/dV 103 us at 16 x 1024 -> 90-110 (more warps to hide latency against
# the spills' local-memory traffic); the step moves with it by at most +-0.1 ms.
timeout 100 env FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=168 python3 scripts/bench_dropout.py \
  --kernels --backends flashtile --csv "$out/drop_k_cap168.csv" >"$out/drop_k_cap168.log" 2>&1 \
  || status=1
grep -A1 "| 0.2 |" "$out/drop_k_cap168.log" | grep -E "\| 0\.2 \||per kernel" | cut -c1-250
timeout 150 python3 -m flashtile.cli train --bench --bench-backends \
  "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=168,sdpa-cudnn:graph" \
  --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
  --csv "$out/train_bench_cap.csv" >"$out/train_bench_cap.log" 2>&1 || status=1
tail -n 7 "$out/train_bench_cap.log" | cut -c1-120
