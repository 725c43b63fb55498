# gpu_check.sh suite "s16" (sourced; $out, $commit, ft() and status are set)
# Planned at the end of session 15 for the next session's first call: s15e (lse2_pre off
# / on, stats_tma with a window / softcap), then the full perf table (the README's, last
# at 36b9475, before stats_tma at hd 64), then the CUDA-graph capture test of dropout.
# ~9 min: run as two calls if the limit is short (s15e, then perf).
source scripts/suites/s15e.sh
source scripts/suites/perf.sh
source scripts/suites/lib/steps.sh
gpu_pytest pytest_graph 60 1 4 tests/test_flash.py -k "graph_capture"
