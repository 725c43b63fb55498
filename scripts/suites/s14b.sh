# gpu_check.sh suite "s14b" (sourced; $out, $commit, ft() and status are set)
# Session 14, after early_expect went into every stage A config (36b9475):
# 1. where `flashtile bench` and bench_hopper part: s14a's perf table had the hd 64 4k
#    forward at 1.191 ms (non-causal) / 0.680 (causal) through flash_attn_func, s14fwd's
#    bench_hopper 1.103 / 0.645 for the same kernel and config; cuDNN agreed within 1%.
#    scripts/fwd_path_ab.py times both calls and cuDNN in one process, alternating.
# 2. the forward's GPU tests that run stage A (dense, window, softcap, every stage, the
#    varlen Gluon forward) with the new default;
# 3. the covering validation grid with every default. ~8 min.
source scripts/suites/lib/steps.sh
timeout 120 python3 scripts/fwd_path_ab.py --head-dims 64 128 --seqlens 4096 16384 \
  >"$out/fwd_path_ab.log" 2>&1 || status=1
tail -n 13 "$out/fwd_path_ab.log"
gpu_pytest pytest_stageA 170 8 8 tests/test_hopper.py tests/test_varlen.py -k \
  "test_hopper_vs_reference or test_hopper_window_vs or softcap_vs or stages_vs or fully_masked or vs_portable or varlen_hopper_gpu or varlen_hopper_window_gpu or hopper_auto"
validate_covering validate_s14b 260
