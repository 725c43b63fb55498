# gpu_check.sh suite "s19c" (sourced; $out, $commit, ft() and status are set)
# s19b's failed test again (test_dropout_graph_capture_gpu[bits] compared the graphed
# Gluon backward reading bits with an eager portable backward drawing, bit for bit; since
# 08eef42 the two round differently, so the eager call now writes and reads bits too),
# then issue 7's whole `train` suite, graphed: the runs with --cuda-graph, the step per
# backend graphed and eager, the sample, the loss curves.
timeout 200 python3 -m pytest -q tests/test_flash.py -k "dropout or graph_capture or plans or bits" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_flash_cuda.log" 2>&1 || status=1
grep -E "^FAILED|passed|failed" "$out/pytest_flash_cuda.log" | tail -n 4
source scripts/suites/train.sh
