# gpu_check.sh suite "s20a" (sourced; $out, $commit, ft() and status are set)
# Stage C on a persistent grid (HopperFwdConfig.persistent, ops/hopper_fwd._fwd_cp_kernel,
# opt-in): one program per SM walks its work items; the producer streams the next item's
# K / V into the ring under the current one's end, each consumer loads its next Q under
# its last PV and epilogue, O is stored from registers. Tests first (the persistent GPU
# tests: one program per SM, 1 and 3 programs walking every item, windows and softcaps),
# then the one-shot and the persistent stage C against cuDNN in one process, three
# interleaved rounds.
# Prediction (hd 128, bf16, DESIGN.md shapes): +2-4% at 4k, +5-10% at 1k, under +1% at
# 16k, non-causal and causal; hd 64 / 256 (stage C is not their shipped schedule) the
# same direction.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_persistent 330 4 6 tests/test_hopper.py -k "persistent"
timeout 200 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 2048 4096 16384 \
  --only gluon-C gluon-Cp --rounds 3 --csv "$out/cp128.csv" >"$out/cp128.log" 2>&1 || status=1
grep -A20 "^forward TFLOPS" "$out/cp128.log"
grep -E "FAILED|MISMATCH|Error" "$out/cp128.log" | head -5
timeout 150 python3 scripts/bench_hopper.py --head-dims 64 256 --seqlens 1024 4096 16384 \
  --only gluon-C gluon-Cp --rounds 2 --csv "$out/cp64_256.csv" >"$out/cp64_256.log" 2>&1 || status=1
grep -A20 "^forward TFLOPS" "$out/cp64_256.log"
grep -E "FAILED|MISMATCH|Error" "$out/cp64_256.log" | head -5
