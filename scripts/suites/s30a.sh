# gpu_check.sh suite "s30a" (sourced; $out, $commit, ft() and status are set)
# Written in session 29 after its device time ran out, for the next session.
# HopperBwdConfig.window_one_loop (opt-in): with a sliding window the one-kernel
# backward's far-edge steps join the one loop (behind a second branch with one_loop 2).
# Launch-specialised sm_90 builds at hd 128 (compile_sm90.py --hopper-bwd --spec --loops,
# "reduce fixed window"): three loops 240 B of spills (non-causal; 0 reloads in the
# unmasked loop, 31-38 per far-edge step), 368 B causal (7-22 per step); one loop 4 B
# non-causal (1 reload and 682 instructions per step against the unmasked loop's 0 and
# 585), 52 B causal (11-13 reloads every step). Windows now keep two kernels at hd 128 (not measured: the
# one-kernel window builds were sent back for their spills in session 28).
# 1. GPU tests with the window one-loop forced on the fixed-point kernel: the fixed and
#    reduce public-API tests (windows among them; causal and not, hd 64 / 128), the
#    one-loop tests.
# 2. A/B through the public call, window 1024 (window_size (1024, 0) causal, (1024, -1)
#    not), hd 128, 4k / 16k: the default (two kernels), the fixed-point one-kernel with
#    three loops (FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1), and with one loop.
# Prediction: non-causal, three loops +4-10% over two kernels (the spills sit on the 1-2
# far-edge steps of a key tile's many), one loop within +-5% of three loops; causal (17
# steps per key tile, spills on most) three loops -10% to +5%, one loop -5% to +5% of it.
# Ship the one-kernel for windows where it wins both runs of ms (flushed and not).
source scripts/suites/lib/steps.sh
O=FLASHTILE_HOPPER_BWD_OVERRIDES
F=FLASHTILE_HOPPER_BWD_REDUCE_FIXED
FLASHTILE_HOPPER_BWD_OVERRIDES=one_loop=2,window_one_loop=1 gpu_pytest pytest_window_one_loop \
  240 4 6 tests/test_hopper_bwd_reduce.py -k "fixed_public_api or reduce_public_api or one_loop"
env_ab window_one_loop_ab 300 --window 1024 \
  --ab "|$F=1|$F=1;$O=one_loop=2,window_one_loop=1" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 1 --rounds 3
