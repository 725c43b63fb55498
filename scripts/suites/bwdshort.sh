# gpu_check.sh suite "bwdshort" (sourced; $out, $commit, ft() and status are set)
# The one-launch short-sequence portable backward (ops/flash.py _attn_bwd_short_kernel,
# session 9, opt-in FLASHTILE_BWD_SHORT=1): its tests on the GPU (the small grid with it
# forced, determinism against the two-kernel backward), then attention alone at
# MiniGPT's shapes (scripts/bench_dropout.py: GPU us of forward and backward, wall us)
# with it off, on at the dK/dV tiles, and on at other tiles; then the MiniGPT training
# step (train --bench) off / on. Prediction: at 64 x 256 (384 programs) the backward's
# GPU time with dropout 0.2 from ~139 us to 90-110 us (one mask draw and 5 GEMMs per
# tile pair instead of two and 7), without dropout from ~85 to 60-80 us; at 16 x 1024
# (96 programs, fewer than the 132 SMs, each walking 16 x 16 tile pairs) slower than
# the two-kernel backward.
FLASHTILE_HOPPER_BWD=0 timeout 200 python3 -m pytest -q -n 8 tests/test_flash.py -k short \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_bwdshort.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_bwdshort.log" | tail -n 12
run_b() {  # tag, then env assignments
  local tag=$1; shift
  env "$@" timeout 100 python3 scripts/bench_dropout.py --shapes 64x256,32x512,16x1024 \
    --backends flashtile --reps 30 --tag "$tag" --csv "$out/bwdshort_$tag.csv" \
    >"$out/bwdshort_$tag.log" 2>&1 || status=1
  grep -E "^\| $tag" "$out/bwdshort_$tag.log"
}
echo "| tree | shape | dropout | backend | fwd GPU us | bwd GPU us | fwd+bwd wall us |"
run_b off FLASHTILE_BWD_SHORT=0
run_b on FLASHTILE_BWD_SHORT=1
for t in 64,64,4,2 32,64,8,3 64,64,8,2 64,32,4,2 32,32,4,3; do
  run_b "t${t//,/_}" FLASHTILE_BWD_SHORT=1 FLASHTILE_BWD_SHORT_TILE=$t
done
timeout 60 python3 scripts/bench_dropout.py --shapes 64x256,16x1024 --backends cudnn \
  --reps 30 --tag cudnn >"$out/bwdshort_cudnn.log" 2>&1
grep -E "^\| cudnn" "$out/bwdshort_cudnn.log"
for sh in 0 1; do
  FLASHTILE_BWD_SHORT=$sh timeout 150 python3 -m flashtile.cli train --bench \
    --bench-backends flashtile,sdpa-cudnn --bench-shapes 64x256,16x1024 \
    --csv "$out/train_bench_short$sh.csv" >"$out/train_bench_short$sh.log" 2>&1 || status=1
  echo "FLASHTILE_BWD_SHORT=$sh"; head -n 9 "$out/train_bench_short$sh.log"
done
