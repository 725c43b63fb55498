# gpu_check.sh suite "s14c" (sourced; $out, $commit, ft() and status are set)
# The variant was removed after this run (measured level, benchmarks/results.md); check out
# 795c554 to run this suite again.
# Session 14: stage A over one allocation per ring slot (HopperFwdConfig.slot_ring,
# opt-in; hopper_fwd._fwd_slots_kernel). scripts/membar_probe.py found that Triton's
# barrier pass orders every write of an allocation against every read of it whatever
# the slot, so the shipped rings keep 3 bar.sync per step; with per-slot allocations and
# the loop unrolled by the ring depth, ptxas sm_90 has the hd 64 step loop at 1 bar.sync
# per step (slot_ring 2: each slot's TMA copy issued a step late, 2 steps of lead instead
# of 3) or 2 (slot_ring 1), 449-451 instructions per step against 465, spills 32 B (24 B
# non-causal, which needs the 128 cap too) against 52.
# Prediction: hd 64 forward +2-6% causal with slot_ring 2, -3..+3% non-causal (the cap's
# spills, key tiles last to first); slot_ring 1 +1-3%; hd 128 causal (slot_ring 1, 1k-4k)
# 0-3%. Then the variant's GPU tests, and stage A's GPU tests again with the shipped
# defaults (s14b's 170 s limit cut them at 263 of 356, none failed). ~8 min.
source scripts/suites/lib/steps.sh
source scripts/suites/lib/fwd_sweep.sh
fwd_sweep slots64 50 "--head-dims 64 --seqlens 4096 16384" 4 "" \
  "slot_ring=2,max_regs=128" "slot_ring=1,max_regs=128"
timeout 40 python3 scripts/bench_hopper.py --head-dims 128 --seqlens 1024 2048 4096 \
  --causal 1 --only gluon-A --a-config "slot_ring=1" --csv "$out/slots128.csv" \
  >"$out/slots128.log" 2>&1 || status=1
echo "== hd 128 causal slot_ring=1 (shipped: s14a)"
grep -E "MISMATCH|Error|FAILED" "$out/slots128.log" | head -3
tail -n 3 "$out/slots128.log" | cut -c1-90
gpu_pytest pytest_slots 100 8 6 tests/test_hopper.py -k slot_ring
gpu_pytest pytest_stageA 200 12 8 tests/test_hopper.py tests/test_varlen.py -k \
  "test_hopper_vs_reference or test_hopper_window_vs or softcap_vs or stages_vs or fully_masked or vs_portable or varlen_hopper_gpu or varlen_hopper_window_gpu or hopper_auto"
