# gpu_check.sh suite "s18a" (sourced; $out, $commit, ft() and status are set)
# Prepared at the end of session 17 (device time spent): what its last builds and its new
# dropout default still need on the GPU, ~6 min.
# 1. The plan and dropout tests on CUDA (s17g failed the plan test's dropout case, now
#    pinned to drawing; a portable bits case added), the Gluon-with-bits tests.
# 2. The forward writing the by-key words as half-words (faeee49; SASS step loop 1495 ->
#    1391, 241 registers). Prediction: the forward with bits 92 -> 80-88 us at 64 x 256,
#    195 -> 170-185 at 16 x 1024; the graphed step 7.13 -> ~7.08 / 8.35 -> ~8.25 ms.
# 3. Clocks with nvidia-smi's clock-event reasons (SW power cap, HW slowdown, ...) beside
#    them, hd 64 forward+backward at 4k / 16k (s17e: 6-8% lower clock with flashtile's
#    backward, also at 4k where both draw ~515 W).
# 4. `flashtile validate --grid covering` with the dropout default (cut at 35/37 in s17g).
source scripts/suites/lib/steps.sh
timeout 200 python3 -m pytest -q tests/test_flash.py -k "plans or dropout or graph_capture" \
  -p no:cacheprovider >"$out/pytest_flash_cuda.log" 2>&1 || status=1
grep -E "^FAILED|passed|failed" "$out/pytest_flash_cuda.log" | tail -n 4
gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
dropout_default_benches
timeout 100 python3 scripts/clocks_attn.py --head-dims 64 --causal 0 --modes fwd_bwd \
  --seconds 1.5 --csv "$out/clocks_attn.csv" >"$out/clocks_attn.log" 2>&1 || status=1
grep -E "^\|" "$out/clocks_attn.log"
validate_covering validate 260
