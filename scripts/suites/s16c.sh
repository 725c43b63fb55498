# gpu_check.sh suite "s16c" (sourced; $out, $commit, ft() and status are set)
# bwdab (the backward's lse2_pre / group_branch in one process) then graphtrain (the
# MiniGPT step as a CUDA graph; carry "data"). ~6.5 min.
source scripts/suites/bwdab.sh
source scripts/suites/graphtrain.sh
