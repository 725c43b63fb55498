# gpu_check.sh suite "s19g" (sourced; $out, $commit, ft() and status are set)
# The dropout partition (FLASHTILE_HOPPER_DROPOUT_WS=1, opt-in: s18f measured it +15%
# against the consumers drawing) again, with the 16-bit draw: half the Philox calls per
# step for its 4 warps (one per scheduler; 16 calls per thread and 128 x 128 tile, was
# 32). Prediction: the partition now keeps ahead of the consumers (~1000 integer
# instructions a step against ~4500 cycles of consumer step at 16 x 1024), so the
# training forward 95.5 -> 70-85 us at 16 x 1024 and 46.7 -> 38-45 at 64 x 256.
timeout 100 env FLASHTILE_HOPPER_DROPOUT_WS=1 python3 scripts/bench_dropout.py --kernels \
  --backends flashtile --csv "$out/drop_k_ws.csv" >"$out/drop_k_ws.log" 2>&1 || status=1
grep -A1 "| 0.2 |" "$out/drop_k_ws.log" | grep -E "\| 0\.2 \||per kernel" | cut -c1-250
timeout 150 python3 -m flashtile.cli train --bench --bench-backends \
  "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_DROPOUT_WS=1,sdpa-cudnn:graph" \
  --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
  --csv "$out/train_bench_ws.csv" >"$out/train_bench_ws.log" 2>&1 || status=1
tail -n 7 "$out/train_bench_ws.log" | cut -c1-120
