# gpu_check.sh suite "s15c" (sourced; $out, $commit, ft() and status are set)
# The dK/dV kernel with each Q / dO ring slot's lse / delta rows loaded by TMA beside the
# tiles (HopperBwdConfig.stats_tma, opt-in): 16 masked global loads each per thread and
# step become 16 shared-memory loads; ptxas sm_90, hd 64 non-causal step loop 490 -> 424
# instructions (no LDG, IMAD 50 -> 18, ISETP 24 -> 0), spills 20 / 36 B -> 0 (hd 64),
# 28 -> 0 (hd 128 causal). `bwdvscudnn` (43480a0): the hd 64 dK/dV kernel runs its tensor
# pipe at 55% (dQ kernel 75%), 2.09 of 3.33 ms at 4k. Its GPU tests (bitwise the shipped
# path), then bench_hopper_bwd.py off / on at 4k / 16k.
# Prediction: hd 64 backward +5-9% (the dK/dV kernel -8..-14%), hd 128 +2-4%.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_stats 150 8 6 tests/test_hopper_bwd.py -k "stats_tma"
for mode in off on; do
  cfg=""
  [ "$mode" = on ] && cfg="--config stats_tma=1"
  # shellcheck disable=SC2086
  timeout 110 python3 scripts/bench_hopper_bwd.py --seqlens 4096 16384 --only gluon-bwd \
    $cfg --csv "$out/bench_stats_$mode.csv" >"$out/bench_stats_$mode.log" 2>&1 || status=1
  echo "== stats_tma $mode"
  grep -E "FAILED|MISMATCH|Error" "$out/bench_stats_$mode.log" | head -n 5
  tail -n 9 "$out/bench_stats_$mode.log" | cut -c1-110
done
