# gpu_check.sh suite "bwdship" (sourced; $out, $commit, ft() and status are set)
# lse2_pre + group_branch shipped at hd 64 and (with stats_tma) hd 128; stats_tma with
# windows / softcaps: the stats tests (each bitwise the global-load path), the default
# config's determinism / GQA-expand / non-TMA-buffer tests, then the covering grid with
# every shipped default. ~5 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_bwd_stats 120 8 6 tests/test_hopper_bwd.py -k "stats_tma"
gpu_pytest pytest_bwd_default 90 8 6 tests/test_hopper_bwd.py \
  -k "deterministic or gqa_expand or not_tma"
validate_covering validate_covering 240
