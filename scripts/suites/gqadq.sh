# gpu_check.sh suite "gqadq" (sourced; $out, $commit, ft() and status are set)
# The hd 64 GQA dQ ring of 2: the backward's GQA and stats tests with the new default,
# then `hf` (its 16 model tests and the Llama bench). Prediction: HF training step 0.99x -> 1.00x
# sdpa at 8k / 32k (+1.8-1.9% of the attention backward, ~60% of the step). ~3 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_gqa 120 8 4 tests/test_hopper_bwd.py -k "gqa_expand or (stats_tma and not masks)"
source scripts/suites/hf.sh
