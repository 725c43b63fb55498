# gpu_check.sh suite "s20d" (sourced; $out, $commit, ft() and status are set)
# (Session 20's review removed the register epilogue this suite A/Bs: it no longer runs as written.)
# The persistent stage C with its O through the Q buffer and a TMA store, as the one-shot
# kernel does (FLASHTILE_HOPPER_CP_EPILOGUE=tma, now its default), the next Q loaded after
# the store. s20c: with O stored from registers the persistent item's tail was 3.0-3.2 us
# against the one-shot program's 1.4-1.6, which ate the ~2.5 us it saved (Q wait, gap
# between programs). Prediction: the tail back to ~1.5 us and a Q wait of ~0.5 us
# partly under the other warpgroup's steps; fixed cost per item 4.3 -> ~2.5 us, so hd
# 128 non-causal +3-5% over one-shot at 4k, +8-12% at 1k, +1% at 16k.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_persistent 330 4 4 tests/test_hopper.py -k "persistent"
timeout 150 python3 scripts/trace_stage_c.py --seqlens 1024 4096 16384 --causal 0 \
  --persistent both --cp-epilogue tma regs --csv "$out/trace_cp2.csv" >"$out/trace_cp2.log" 2>&1 \
  || status=1
grep -A12 "^per program" "$out/trace_cp2.log"
timeout 150 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 2048 4096 16384 \
  --causal 0 --only gluon-C gluon-Cp --rounds 5 --csv "$out/cp128b.csv" >"$out/cp128b.log" 2>&1 \
  || status=1
grep -A8 "^forward TFLOPS" "$out/cp128b.log"
grep -E "FAILED|MISMATCH|Error" "$out/cp128b.log" "$out/trace_cp2.log" | head -5
