# gpu_check.sh suite "s11check" (sourced; $out, $commit, ft() and status are set)
# Session 11: after s10host (7bec1fb) failed three varlen GQA "expand" tests (the
# per-sequence store pointers sat under the pipeline switch, a misplaced edit; fixed,
# with a CPU test) and its validate hit the suite's own 120 s timeout at 18 / 37 cases:
# the varlen Gluon backward tests, the launch-plan tests (now over dropout, window +
# softcap, hd 256, ragged, and the portable path at hd 128), then the covering
# validation grid with the launch plans on (the default), with time to finish.
timeout 200 python3 -m pytest -q -m gpu -n 8 tests/test_flash.py tests/test_varlen.py \
  -k "launch_plans or varlen_hopper_bwd_gpu" -p no:cacheprovider -rf --tb=short \
  >"$out/pytest_s11check.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_s11check.log" | tail -n 8
timeout 330 python3 -m flashtile.cli validate --grid covering >"$out/validate_s11check.log" \
  2>&1 || status=1
tr '\r' '\n' <"$out/validate_s11check.log" | grep -v "it/s\]$" | tail -n 3
