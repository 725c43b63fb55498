# gpu_check.sh suite "s21c" (sourced; $out, $commit, ft() and status are set)
# hd 128 stage C: the persistent split ring below 16k, paired when causal, and stage C
# (instead of A) for causal 1k / 2k (s21b). The covering validation grid with these
# defaults first (s21b's run of it reached 25 of 37 cases, none failed, behind a pytest
# pool its time limit had killed), then the full perf table (suite perf).
# Predictions against perf at dbba206 (ratios to cuDNN in the same run): hd 128 forward
# non-causal 1k 0.89x -> ~0.95x, 4k 0.98x -> ~0.99x; causal 1k 0.75x -> ~0.85x, 4k 0.98x ->
# ~1.03-1.05x; 16k unchanged; forward+backward moves by the forward's share (~1/3 of the
# time): +1-3% where the forward moves.
source scripts/suites/lib/steps.sh
validate_covering validate 200
source scripts/suites/perf.sh
