# gpu_check.sh suite "s18g" (sourced; $out, $commit, ft() and status are set)
# `flashtile validate --grid covering` with session 18's defaults (the Gluon forward
# drawing dropout at hd 64, the bit blocks, the dQ kernel's transposing reader).
source scripts/suites/lib/steps.sh
validate_covering validate 215
