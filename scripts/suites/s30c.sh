# gpu_check.sh suite "s30c" (sourced; $out, $commit, ft() and status are set)
# Session 30. Under 10 minutes.
source scripts/suites/lib/steps.sh
O=FLASHTILE_HOPPER_BWD_OVERRIDES
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED
# 1. HopperBwdConfig.kv_regs (opt-in): K and V loaded once into registers as the S^T /
#    dP^T wgmmas' A operand in the two-kernel dK/dV kernel. At hd 64 (64 keys on one
#    warpgroup) each step's m64n64k16 wgmmas with both operands in shared memory read 4
#    KB per 32 tensor-core cycles, the SM's 128 B/clk of shared memory; A from registers
#    halves what those two GEMMs read. Uncapped: 190 / 228 registers (non-causal /
#    causal), no spills, two programs per SM where the shipped 168-register cap runs
#    three (the cap spills 184 B with kv_regs). GPU tests (bitwise the shared-memory
#    operands), then the A/B at hd 64 against the shipped build and against it uncapped.
#    Prediction: if the dK/dV step is shared-memory bound, +5-15% backward; if latency
#    bound (three programs per SM measured +13% over two in `bwdcap`), -5 to -15%. My
#    guess: -5%.
gpu_pytest pytest_kv_regs 150 4 6 tests/test_hopper_bwd.py -k "kv_regs"
env_ab kv_regs_ab 150 --ab "|$O=max_regs=none|$O=kv_regs=1,max_regs=none" \
  --head-dims 64 --seqlens 4096 16384 --causal 0 1 --rounds 3
# 2. Sliding windows on the fixed-point one-kernel backward at hd 128, non-causal (three
#    loops; s30a: backward +1.3% / +5.8% at 4k, +6.3% / +6.0% at 16k, L2 flushed / not,
#    over two kernels at window 1024; forward+backward at 4k flushed read -12.4% with a
#    spread of 0.35). Again with 5 rounds at 4k / 8k / 16k, and a window of 256 at 4k /
#    16k. Prediction: backward +2-7% everywhere at window 1024, level to +5% at 256 (a
#    key tile sees 4-5 query tiles, 2 of them masked).
env_ab window_fixed_ab 150 --window 1024 --ab "|$F=1" \
  --head-dims 128 --seqlens 4096 8192 16384 --causal 0 --rounds 5
env_ab window256_fixed_ab 100 --window 256 --ab "|$F=1" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 --rounds 3
# 3. The prologue's warps, 4 and 8 in one run (s30b: 108.1 us at 8 against s29d's 112.6
#    at 4, from two sessions)
for w in 4 8; do
  FLASHTILE_HOPPER_BWD_OVERRIDES=prologue_warps=$w timeout 60 python3 scripts/diag_fwd_bwd.py \
    4,4096,16,128,1 >"$out/diag_prologue$w.log" 2>&1 || status=1
  echo "prologue_warps=$w: $(grep -E "_prologue_kernel" "$out/diag_prologue$w.log" | head -1)"
done
