# gpu_check.sh suite "s15d" (sourced; $out, $commit, ft() and status are set)
# The covering validation grid with stats_tma on at hd 64 (the shipped backward's dK/dV
# kernel reads lse / delta from shared memory; `s15c`: +3.5% to +8.1%, its 16 GPU tests
# bitwise the old path). ~4 min.
source scripts/suites/lib/steps.sh
validate_covering validate 215
