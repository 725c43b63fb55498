# gpu_check.sh suite "s39a" (sourced; $out, $commit, ft() and status are set)
# s37a cut to fit the ~300 s of device time session 39 had left after refused starts:
# the floor cell first (hd 128 non-causal 16k, 0.997x cuDNN at 1b99241), then the GPU
# tests of the split ring without O buffers, then causal; 1k non-causal and 8k causal
# dropped. Shipped against K3 V3 without O buffers (persistent, paired when causal);
# predictions as in s37a (docs/performance.md step 98).
source scripts/suites/lib/steps.sh
noo="FLASHTILE_HOPPER_FWD_OVERRIDES=num_stages=3,v_stages=3,o_stage=0,persistent=1,paired=1"
env_ab fwd_noo128 150 --ab "|$noo" --measures fwd --head-dims 128 \
  --seqlens 4096 16384 --causal 0 --rounds 3
gpu_pytest pytest_noo 150 4 4 tests/test_hopper.py -k "split_no_o_stage"
env_ab fwd_noo128c 150 --ab "|$noo" --measures fwd --head-dims 128 \
  --seqlens 4096 16384 --causal 1 --rounds 3
