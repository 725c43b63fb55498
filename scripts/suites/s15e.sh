# gpu_check.sh suite "s15e" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 15, not yet run: the delta preprocess also writes, per 64 query
# rows, their lse in log2 units then their delta, and the dK/dV kernel loads both with one
# TMA box behind its own barrier (HopperBwdConfig.lse2_pre, with stats_tma; opt-in).
# ptxas sm_90, hd 64 non-causal step loop 424 -> 360 instructions and 5 -> 3 bar.sync
# (the shipped stats_tma signals the Q and dO barriers with two copies each, which costs
# a bar.sync each). Its GPU tests (bitwise the global-load path), then bench_hopper_bwd.py
# at hd 64 with the shipped config (stats on), lse2_pre=1, and lse2_pre=1,group_branch=1,
# and at hd 128 with stats_tma=1, then with lse2_pre=1 and group_branch=1 added.
# Also HopperBwdConfig.group_branch (no integer division per step for single-head
# programs: ~36 instructions skipped, hd 64 step ~343 on that path).
# Prediction: hd 64 backward +2-5% from lse2_pre and +1-4% more from group_branch; hd 128
# 0-3%. ~6 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stats 180 8 6 tests/test_hopper_bwd.py -k "stats_tma and not masks"
for run in "64|" "64|lse2_pre=1" "64|lse2_pre=1,group_branch=1" "128|stats_tma=1" \
    "128|stats_tma=1,lse2_pre=1" "128|stats_tma=1,lse2_pre=1,group_branch=1"; do
  hd=${run%%|*}
  over=${run#*|}
  cfg=""
  [ -n "$over" ] && cfg="--config $over"
  tag="d${hd}_${over:-shipped}"
  tag=${tag//[=,]/_}
  # shellcheck disable=SC2086
  timeout 100 python3 scripts/bench_hopper_bwd.py --seqlens 4096 16384 --head-dims "$hd" \
    --only gluon-bwd $cfg --csv "$out/bench_$tag.csv" >"$out/bench_$tag.log" 2>&1 \
    || status=1
  echo "== hd $hd ${over:-shipped}"
  grep -E "FAILED|MISMATCH|Error" "$out/bench_$tag.log" | head -n 5
  tail -n 5 "$out/bench_$tag.log" | cut -c1-110
done
# stats_tma with a window / softcap (hopper_bwd.STATS_WITH_MASKS, set by the test): bitwise
# the global-load path; if it passes, the library can set STATS_WITH_MASKS = True
gpu_pytest pytest_stats_masks 150 8 6 tests/test_hopper_bwd.py -k "stats_tma_masks"
