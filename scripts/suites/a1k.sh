# gpu_check.sh suite "a1k" (sourced; $out, $commit, ft() and status are set)
# Stage A of the Gluon forward before / after a change, side by side on one GPU: the
# source tree under .variants/main/src (carried) and this checkout, hd 128 / 256 at 1k
# and 4k, causal and not (bench_hopper.py --only gluon-A, cuDNN beside it).
for tree in "$PWD/.variants/main/src" "$PWD/src"; do
  echo "== $tree"
  PYTHONPATH="$tree" python3 scripts/bench_hopper.py --head-dims 64 128 256 --seqlens 1024 4096 \
    --only gluon-A >"$out/a1k_$(basename "$(dirname "$tree")").log" 2>&1 || status=1
  tail -n 13 "$out/a1k_$(basename "$(dirname "$tree")").log"
done
