# gpu_check.sh suite "s22d" (sourced; $out, $commit, ft() and status are set)
# Session 22. 1. hd 128 non-causal ships the split ring the other way round (K ring 2,
#    V ring 3) below 16k (s22a), and the one-shot grid (varlen launches, odd causal tile
#    counts, FLASHTILE_HOPPER_C_PERSISTENT=0) now takes the deeper of a split config's two
#    rings (HopperFwdConfig.one_shot(): 3): GPU tests of the shipped stage C paths,
#    windows / softcaps through it, the Gluon varlen forward.
# 2. hd 64 on stage C's persistent split ring (paired when causal), never measured: the
#    bench against the shipped stage A and the one-shot stage C at 1k / 4k / 16k.
#    Prediction: the split ring takes stage C's fixed cost per item down as at hd 128
#    (+5-10% over one-shot C at 1k, +1-3% at 4k) and paired causal +5% at 1k-4k, but
#    from C's lower base at hd 64 (fbfae63: C 217/354/413 causal, 381 non-causal 4k
#    against A 300/399/437, 456): still below stage A, by 5-15%. Stage A stays unless
#    Cs beats it.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s22d 200 8 6 tests/test_hopper.py tests/test_varlen.py -k \
  "persistent_window_softcap or hopper_vs_portable or (stages_vs_reference and stageC) \
or k_wait_first or free_running or varlen"
timeout 200 python3 scripts/bench_hopper.py --head-dims 64 --seqlens 1024 4096 16384 \
  --only gluon-A gluon-C gluon-Cs --rounds 3 --csv "$out/cs64.csv" >"$out/cs64.log" 2>&1 \
  || status=1
grep -A8 "^forward TFLOPS" "$out/cs64.log"
grep -E "FAILED|MISMATCH|Error" "$out/cs64.log" | head -5
