# gpu_check.sh suite "s21d" (sourced; $out, $commit, ft() and status are set)
# 1. The covering validation grid's last 4 cases (s21c's run reached 33 of 37, none failed,
#    before its 200 s limit).
# 2. perf at e588523 read forward+backward below dbba206's perf (session 16) at 1k: hd 64
#    causal 311 -> 214, hd 128 non-causal 423 -> 377 (16k 492 -> 473), though hd 64's
#    forward and backward configs did not change this session. A/B in one machine start:
#    dbba206's tree (carried as .old/src), this tree, and this tree with the persistent
#    grid off (FLASHTILE_HOPPER_C_PERSISTENT=0). Prediction: the same numbers within 3%
#    for the three (the 1k rows are ~1 ms calls whose host time may show as run-to-run
#    noise); a drop only in this tree would be session 21's forward in training calls.
source scripts/suites/lib/steps.sh
validate_covering_tail validate_tail 100 34
ab() {  # TAG PYTHONPATH [VAR=VALUE]
  local tag=$1 path=$2
  shift 2
  for spec in "yes 64 1024" "no 128 1024 16384"; do
    set -- $spec
    env PYTHONPATH="$path" ${AB_ENV:-} timeout 90 python3 -m flashtile.cli bench --causal $1 \
      --head-dims $2 --seqlens "${@:3}" --backends flashtile sdpa-cudnn --rounds 3 \
      --csv "$out/ab_${tag}_$2.csv" >"$out/ab_${tag}_$2.log" 2>&1 || status=1
    echo "== $tag"; grep -E "^B[0-9].*(flashtile|cudnn)" "$out/ab_${tag}_$2.log" | cut -c1-100
  done
}
ab old "$PWD/.old/src"
ab new "$PWD/src"
AB_ENV=FLASHTILE_HOPPER_C_PERSISTENT=0 ab newp0 "$PWD/src"
