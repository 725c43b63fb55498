# gpu_check.sh suite "headgroup" (sourced; $out, $commit, ft() and status are set)
# The Gluon forward's program order: the 2-D grid runs each (batch, head)'s query tiles
# in turn (longest first under a causal mask), so a causal launch ends on the last
# head's longest tiles; the grouped 1-D order (FLASHTILE_HOPPER_HEAD_GROUP=N,
# _gluon_common.grouped_tile) runs every head of a group of N longest tile first and ends
# on short tiles. Tests of the grouped order, then the shipped Gluon columns (stage A at
# hd 64, stage C at hd 128) at 1k / 4k / 16k for N = 0 (2-D grid), 8, 32. Prediction:
# causal +2-6% at 4k (hd 64 from 0.96x cuDNN to ~1.0x), +4-10% at 1k, +0-3% at 16k where a
# program is a smaller share of the launch; non-causal within 1% (all programs equal);
# N = 32 at 16k may lose L2 reuse (32 heads' K/V, 128 MB at hd 64, over the 50 MB L2).
timeout 200 python3 -m pytest -q -m gpu -n 4 tests/test_hopper.py -k grouped_order \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_headgroup.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_headgroup.log" | tail -n 8
for hg in 0 8 32; do
  FLASHTILE_HOPPER_HEAD_GROUP=$hg timeout 150 python3 scripts/bench_hopper.py \
    --head-dims 64 128 --seqlens 1024 4096 16384 --only gluon-A gluon-C \
    >"$out/headgroup_$hg.log" 2>&1 || status=1
  echo "== head group $hg"
  tail -n 14 "$out/headgroup_$hg.log"
done
