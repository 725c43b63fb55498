# gpu_check.sh suite "s10host" (sourced; $out, $commit, ft() and status are set)
# Built at the end of session 10 after the device time ran out (CPU-checked only):
# launch plans for the portable forward / backward (flash._PLANS, USE_PLANS), and the
# varlen Gluon backward's expanded GQA programs (opt-in: gqa_expand=1 override). GPU
# tests through both, then the host paths off / on in one process at the Gluon shape and
# at MiniGPT's (portable) shape, then the MiniGPT step in interleaved rounds.
# Predictions (CPU, fake driver: plans -24 to -40% of the portable call's host time):
# tests pass; portable attention_forward / attention_backward -20 to -35% host us at
# B4 S256; MiniGPT step ratio up by 0.02-0.04 (within the run's spread).
timeout 240 python3 -m pytest -q -m gpu -n 8 tests/test_flash.py tests/test_varlen.py \
  -k "launch_plans or compile or lse_zeros or hopper_bwd_gpu or varlen_gpu" -p no:cacheprovider \
  -rf --tb=short >"$out/pytest_s10host.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_s10host.log" | tail -n 8
timeout 120 python3 -m flashtile.cli validate --grid covering >"$out/validate_s10host.log" 2>&1 \
  || status=1
tail -n 2 "$out/validate_s10host.log"
timeout 150 python3 scripts/host_split.py --ab 2,640,16,128,1 4,256,6,64,1 \
  >"$out/host_ab.log" 2>&1 || status=1
grep -E "^[|]" "$out/host_ab.log"
timeout 200 python3 -m flashtile.cli train --bench --bench-rounds 8 --bench-steps 60 \
  --bench-backends flashtile,sdpa-cudnn --bench-shapes 64x256,16x1024 \
  --csv "$out/train_bench_s10host.csv" >"$out/train_bench_s10host.log" 2>&1 || status=1
head -n 8 "$out/train_bench_s10host.log"
