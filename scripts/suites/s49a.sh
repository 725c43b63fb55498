# gpu_check.sh suite "s49a" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 48, not run there (device time). First the GPU checks of what
# session 48 shipped without a GPU run of the defaults: the causal hd 128 fixed-point
# backward with dq_finish on (s48a ran it forced, 7 tests passed, at 0a20ba5) and
# HopperBwdConfig.finish_programs (added after that run: the finishing programs from
# n_fin on have no units): the reduce tests and the covering grid's hd 128 cases.
# Then, non-causal hd 128, how many finishing programs: s48a read dq_finish +0.1% / -0.8%
# at 4k / 16k with one per SM (132 programs reading and writing 192 MB at once in the
# last wave). Prediction: 32 / 16 programs spread that over ~100 / ~200 us of the last
# wave's ~165 us and gain +0.5% to +1.5% over dq_finish=0 at 4k, level at 16k; if
# one of them reads > +0.7% at both lengths, ship it non-causal. Then the floor suite.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_reduce 240 4 8 tests/test_hopper_bwd_reduce.py -k "finish or causal or fixed"
validate_covering_tail validate_hd128 200 1 128
env_ab envab_s49a_finish_n 200 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=dq_finish=0|FLASHTILE_HOPPER_BWD_OVERRIDES=dq_finish=1|FLASHTILE_HOPPER_BWD_OVERRIDES=dq_finish=1,finish_programs=32|FLASHTILE_HOPPER_BWD_OVERRIDES=dq_finish=1,finish_programs=16" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 --measures bwd --rounds 2 --sustained 2
source scripts/suites/floor.sh
