# gpu_check.sh suite "s16" (sourced; $out, $commit, ft() and status are set)
# Planned at the end of session 15 for the next session's first call: s15e (lse2_pre,
# group_branch, stats_tma with masks) then s16b (dropout under graph capture, dropout
# bits). ~10 min together: run them as two calls.
source scripts/suites/s15e.sh
source scripts/suites/s16b.sh
