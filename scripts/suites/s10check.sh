# gpu_check.sh suite "s10check" (sourced; $out, $commit, ft() and status are set)
# Session 10's host-side changes on the GPU: the cached Gluon launch
# (ops/_gluon_common.launch -> _launch.cached_launch_kw: forward, delta, dK/dV, dQ) and
# set_materialize_grads(False) on the autograd Functions (no zeros for the lse's
# gradient: one fill kernel and allocation fewer per backward). GPU tests through both
# (Gluon forward / backward / varlen subsets, torch.compile), then host_split.py,
# diag_fwd_bwd.py at 640 tokens, and the MiniGPT step in interleaved rounds.
# Predictions: tests pass; Gluon attention_forward 82-90 -> ~50 us of host and
# attention_backward 215-307 -> ~150 us (B2 S640 H16 D128); autograd.grad 10-20% less;
# the B25 S640 forward+backward (863 us at 7332463, host-bound) 10-20% faster; the
# MiniGPT step ratio to cuDNN +0.01-0.03 (0.92x / 0.89x in session 9).
timeout 240 python3 -m pytest -q -m gpu -n 8 tests/test_hopper_bwd.py tests/test_hopper.py \
  tests/test_varlen.py tests/test_flash.py -k "test_hopper_vs_reference or (test_hopper_bwd_vs_reference and split) or hopper_gpu or hopper_bwd_gpu or compile or gqa_expand or lse_zeros" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_s10check.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_s10check.log" | tail -n 8
timeout 120 python3 scripts/host_split.py >"$out/host_split.log" 2>&1 || status=1
grep -E "^[|]" "$out/host_split.log"
timeout 100 python3 scripts/diag_fwd_bwd.py 25,640,16,128,1 >"$out/diag_s10check.log" 2>&1 || status=1
grep -E "^(B[0-9]+ S|host )" "$out/diag_s10check.log"
timeout 200 python3 -m flashtile.cli train --bench --bench-rounds 6 --bench-steps 60 \
  --bench-backends flashtile,sdpa-cudnn --bench-shapes 64x256,16x1024 \
  --csv "$out/train_bench_s10.csv" >"$out/train_bench_s10.log" 2>&1 || status=1
head -n 12 "$out/train_bench_s10.log"
