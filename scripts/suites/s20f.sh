# gpu_check.sh suite "s20f" (sourced; $out, $commit, ft() and status are set)
# The covering validation grid with stage C's persistent grid shipped (s20e's run of it
# reached 33 of 37 cases, none failed, before its time limit).
source scripts/suites/lib/steps.sh
validate_covering validate 255
