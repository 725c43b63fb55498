# gpu_check.sh suite "bwd64sweep" (sourced; $out, $commit, ft() and status are set)
# Tiles of the two-kernel Gluon backward at hd 64 (one-warpgroup programs, so two or more
# share an SM, as the forward's capped stage A): scripts/bench_hopper_bwd.py per --config
# override at 1k / 4k / 16k, causal and not, beside the portable backward (the shipped
# one at hd 64 when this ran, bdcf4c2). Then the no-recompile test of the Gluon forward.
source scripts/suites/lib/bwd_sweep.sh
bwd_sweep 64 "1024 4096 16384" "gluon-bwd portable-bwd" "" \
  "block_n=64,num_warps=4,num_stages=3,dq_block_m=64,dq_block_n=128,dq_num_warps=4,dq_num_stages=2" \
  "block_n=64,num_warps=4,num_stages=2,dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=3" \
  "dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=3" \
  "block_n=64,num_warps=4,num_stages=3,dq_block_m=64,dq_block_n=64,dq_num_warps=4,dq_num_stages=3"
python3 -m pytest -q -m gpu tests/test_hopper.py -k no_recompile -p no:cacheprovider -rf \
  --tb=short >"$out/pytest_norecompile.log" 2>&1 || status=1
tail -n 3 "$out/pytest_norecompile.log"
