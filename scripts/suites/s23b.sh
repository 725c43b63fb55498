# gpu_check.sh suite "s23b" (sourced; $out, $commit, ft() and status are set)
# Session 23. 1. HopperBwdConfig.reduce_late: the one-kernel backward (s23a: hd 128
#    non-causal +10.7% / +13.4% over the two-kernel backward at 4k / 16k, causal -5.6% /
#    +0.6%, hd 64 -5% to -10%) adds each step's dQ under the next step's S^T instead of at
#    the step's end. Its tests (with the s23a ones), then both against the two-kernel
#    backward in one process, interleaved (bench_hopper_bwd --ab), 1k-16k.
#    Prediction: the staging store (32 KB at hd 128, ~300 of ~3000 cycles per step) leaves
#    the tensor cores' path: reduce_late +4-8% over reduce at hd 128, +2-5% at hd 64.
# 2. Session 22's default (hd 128 non-causal split ring K 2 / V 3 below 16k): s22e's GPU
#    tests whole (s22d's 200 s limit stopped them at ~178 of 233, none failed).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s23b 200 8 8 tests/test_hopper_bwd_reduce.py
R="dq_reduce=1,block_n=128,num_warps=8,prefetch_stats=0,max_regs=none"
timeout 150 python3 scripts/bench_hopper_bwd.py --ab "|$R|$R,reduce_late=1" --rounds 5 \
  --head-dims 128 64 --seqlens 1024 2048 4096 8192 16384 --causal 0 1 \
  --csv "$out/reduce_ab.csv" >"$out/reduce_ab.log" 2>&1 || status=1
grep -A24 "^Gluon backward TFLOPS" "$out/reduce_ab.log" | cut -c1-140
grep -E "Error|Traceback" "$out/reduce_ab.log" | head -5
gpu_pytest pytest_s22e 250 12 6 tests/test_hopper.py tests/test_varlen.py -k \
  "persistent_window_softcap or hopper_vs_portable or (stages_vs_reference and stageC) \
or k_wait_first or free_running or varlen"
