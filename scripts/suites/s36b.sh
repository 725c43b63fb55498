# gpu_check.sh suite "s36b" (sourced; $out, $commit, ft() and status are set)
# Session 36: the turn waits off at hd 256 non-causal (HopperFwdConfig.turn_waits=False,
# shipped after s36a measured +7-8% on an H100).
# 1. GPU tests: hd 256 stage C through the public call and the split ring without O
#    buffers (now free-running non-causal), the varlen hd 256 paths, stage C free-running
#    at hd 64 / 128 on the 1k and the 16k configs (the one-shot grid at hd 128).
# 2. env_ab forward alone, interleaved: hd 256 non-causal, shipped against the turn waits
#    forced on (predicted +5-8% as on the H100); hd 128 16k, shipped (turn waits on)
#    against off (s36a, H100: +2.8% / +1.9% non-causal / causal; predicted +1-3%), with
#    forward+backward.
# 3. The hd 256 rows of the perf table (flashtile bench, every backend, 3 rounds).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_turns 200 4 6 tests/test_hopper.py tests/test_varlen.py \
  -k "hd256_stage_c or no_o_stage_hd256 or free_running or (varlen_hopper_gpu and 256)"
env_ab fwd_turns256 150 --ab "|FLASHTILE_HOPPER_C_PINGPONG=1" --measures fwd \
  --head-dims 256 --seqlens 1024 4096 16384 --causal 0 --rounds 3
env_ab fwd_turns128 150 --ab "|FLASHTILE_HOPPER_C_PINGPONG=0" --measures fwd fwd+bwd \
  --head-dims 128 --seqlens 16384 --causal 0 1 --rounds 3
ft bench --head-dims 256 --rounds 3 --commit "$commit" --csv "$out/bench_perf256.csv" \
  >"$out/bench_perf256.log" 2>&1 || status=1
grep -E "D256|matmul" "$out/bench_perf256.log" | grep -v "run/s" | grep -E "flashtile |cudnn|matmul" \
  | cut -c1-170
