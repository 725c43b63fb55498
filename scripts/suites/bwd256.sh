# gpu_check.sh suite "bwd256" (sourced; $out, $commit, ft() and status are set)
# The Gluon backward at hd 256 (built 2026-11-30, not yet run on a GPU; opt-in): dK / dV
# in two column blocks (d_split = 2), dQ 64 x 32. First its GPU tests (float64
# reference, poisoned buffers, determinism, against the portable backward), then its
# speed against the portable backward and cuDNN (the portable tile sweep is tune256).
# Prediction: 1.5x the dK/dV kernel's FLOPs, but wgmma without spills where the portable
# dK/dV kernel spills 616 B and its dQ runs mma.sync: backward 2-3x the portable one.
timeout 300 python3 -m pytest -q -m gpu -n 4 tests/test_hopper_bwd.py -k "d256 or 256]" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_bwd256.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_bwd256.log" | tail -n 20
python3 scripts/bench_hopper_bwd.py --head-dims 256 --seqlens 1024 4096 16384 \
  --only gluon-bwd portable-bwd ft-fwd+gluon ft-fwd+port --csv "$out/bwd256.csv" \
  >"$out/bwd256.log" 2>&1 || status=1
grep -E "MISMATCH|FAILED" "$out/bwd256.log" | head -5
tail -n 8 "$out/bwd256.log" | cut -c1-150
