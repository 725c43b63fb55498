# gpu_check.sh suite "s21b" (sourced; $out, $commit, ft() and status are set)
# hd 128 stage C ships the persistent grid with the split ring below 4k non-causal and,
# paired, below 8k causal (s21a); a causal call with an odd query-tile count runs one-shot.
# GPU tests of what changed (the paired order's kernel choice, the persistent windows /
# softcaps with the shipped split ring, stage C through its shipped configs), the covering
# validation grid, then the bench that places the boundaries: 8k (not in s21a) and, causal
# 1k / 2k, stage A (what hopper_fwd_schedule runs there) against the split + paired grid.
# Predictions: causal 1k / 2k, Cs >= A by 5-15% (s21a Cs 357 / 476; A measured 309 / 381
# in older runs); 8k, Cs against one-shot C -1% to +2% non-causal, +0 to +4% causal
# (between 4k's +1% / +6.5% and 16k's -1.8% / -2.4%).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s21b 240 8 6 tests/test_hopper.py -k "paired or many_items or \
persistent_window_softcap or (stages_vs_reference and stageC) or hopper_vs_portable"
validate_covering validate 150
timeout 200 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 2048 8192 \
  --only gluon-A gluon-C gluon-Cs --rounds 3 --csv "$out/bound128.csv" \
  >"$out/bound128.log" 2>&1 || status=1
grep -A8 "^forward TFLOPS" "$out/bound128.log"
grep -E "FAILED|MISMATCH|Error" "$out/bound128.log" | head -5
