# gpu_check.sh suite "s28a" (sourced; $out, $commit, ft() and status are set)
# Session 28.
# 1. The causal softcap / window tests of the Gluon backward with the tile-major launch
#    order forced (FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1): the shipped default
#    (causal 4k <= seqlen_k < 16k) covers softcapped and windowed causal calls too, and
#    only the plain causal tests ran with it (s27c, s27d).
# 2. ncu (clocks left alone) on one backward at hd 128 (16k tokens): why the fixed-point
#    one-kernel backward gains +10% non-causal at 16k and loses -17% causal (s26a / s24a).
#    The one-kernel causal (FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1) and non-causal (default)
#    at 16k, the two-kernel causal at 16k (default) and cuDNN's causal at 16k; and the
#    two-kernel causal at 4k tile-major (default) against head-major (tile_major=0): the L2
#    hit rate of the two orders (s27c's L2 explanation, unprofiled).
#    Prediction: the causal one-kernel's dK/dV+dQ kernel spills (local bytes > 0 in the
#    band steps) and issues more per FLOP than the non-causal one; tile-major order has a
#    lower L2 hit rate at 4k than head-major and still runs faster (the tail).
source scripts/suites/lib/steps.sh
FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1 gpu_pytest pytest_tile_major_capwin 200 4 6 \
  tests/test_hopper_bwd.py -k "causal and (softcap or window)"
files=()
ncu_bwd() {  # TAG SEQLEN CAUSAL_FLAG BACKEND [VAR=VALUE...]
  local tag=$1 seqlen=$2 causal=$3 backend=$4
  shift 4
  local f="ncu_$tag.csv"
  timeout 120 env "$@" ncu --clock-control none --profile-from-start off --csv --page raw \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --metrics l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum \
    python3 scripts/ncu_ladder.py run --backward --backend "$backend" --seqlen "$seqlen" \
    --head-dim 128 $causal >"$out/$f" 2>"$out/${f%.csv}.err" \
    || { echo "ncu $f failed"; tail -n 3 "$out/${f%.csv}.err"; status=1; }
  files+=("$f")
}
ncu_bwd fixed_causal_16k 16384 --causal flashtile FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1
ncu_bwd fixed_noncausal_16k 16384 "" flashtile
ncu_bwd split_causal_16k 16384 --causal flashtile
ncu_bwd cudnn_causal_16k 16384 --causal sdpa-cudnn
ncu_bwd split_causal_4k_tile 4096 --causal flashtile
ncu_bwd split_causal_4k_head 4096 --causal flashtile FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=0
python3 scripts/ncu_ladder.py summarize "$out" --files "${files[@]}" \
  | tee "$out/ncu_s28a.md" | cut -c1-260 || status=1
