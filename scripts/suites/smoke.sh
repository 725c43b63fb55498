# gpu_check.sh suite "smoke" (sourced; $out, $commit, ft() and status are set)
# The CPU-sized tests of the production op on the GPU, after a host-path or dispatch
# change: tests/test_flash.py without its full grid (small grid, dropout replay and
# statistics, determinism, race, torch.compile fullgraph, no-recompile), the eager-vs-op
# bitwise tests, the API errors, the ring's fused merge and its ring of one. ~2 min.
python3 -m pytest -q -n 8 tests/test_flash.py tests/test_host_overhead.py tests/test_api.py \
  tests/test_ring_merge.py tests/test_ring.py -k "not grid_full and not ranks" \
  -p no:cacheprovider -rf --tb=short --durations=8 >"$out/pytest_smoke.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_smoke.log" | tail -n 25
