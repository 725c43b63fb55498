# gpu_check.sh suite "s25d" (sourced; $out, $commit, ft() and status are set)
# Session 25: the Gluon varlen forward / backward at 2k- and 4k-long sequences, where the
# portable varlen kernels run by default (configs.HOPPER_VARLEN_MIN_SEQLEN = 8k, set at
# ac7393a / 30970b9; 4k never measured). Three runs of `bench --suite varlen`: default,
# the Gluon forward forced (FLASHTILE_HOPPER_VARLEN=1), and both Gluon (+ _BWD=1). The
# dense columns run the same kernels in all three (their spread is the noise).
# Prediction: at 4k the Gluon forward wins everywhere (+5-20%); at 2k it wins at hd 128
# (dense 2k hd 128 now runs stage C), level or behind at hd 64; the backward as in
# 30970b9 (Gluon ahead only at hd 128 non-causal at 2k), ahead at 4k. ~3 min.
for mode in ${S25D_ORDER:-default fwd both}; do
  case $mode in
    default) envs=() ;;
    fwd) envs=(FLASHTILE_HOPPER_VARLEN=1) ;;
    both) envs=(FLASHTILE_HOPPER_VARLEN=1 FLASHTILE_HOPPER_VARLEN_BWD=1) ;;
  esac
  env "${envs[@]}" python3 -m flashtile.cli bench --suite varlen --quick --commit "$commit" \
    --varlen-max-lens 2048 4096 --csv "$out/bench_varlen_$mode.csv" \
    >"$out/bench_varlen_$mode.log" 2>&1 || status=1
  echo "== $mode"
  grep -E "^(64|128) " "$out/bench_varlen_$mode.log"
done
