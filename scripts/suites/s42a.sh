# gpu_check.sh suite "s42a" (sourced; $out, $commit, ft() and status are set)
# For session 42, after session 41 shipped stage A's hd 64 causal tile-major grid from 8k
# (configs.TILE_HEADS = 8 from TILE_HEADS_MIN = 8192; docs/performance.md step 99).
# 1. GPU tests: stage A tile-major, whose 8k cases now run one batch of 6 heads (two
#    batches ran four workers out of an H100's memory in the fp32 reference, `s41a`).
# 2. env_ab forward, hd 64 causal 2k / 4k (head-major as shipped) against blocks of 8 /
#    16 / 32 heads, 9 rounds: 4k read +7.6 / +2.2 / -1.7 / -1.6% with blocks of 8 in four
#    runs and +13% with 32 in the one run that had it. Prediction: blocks of 16-32 within
#    +-2% of head-major at 4k (the first run's gains came with a slow baseline); ship a
#    lower TILE_HEADS_MIN only if one block size wins by more than this run's noise.
# Then, on the warm machine: `perf` (the README's H200 table is 1b99241's).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s42 250 4 4 tests/test_hopper.py -k "tile_major"
tm="FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads"
env_ab fwd_tm64c_4k 200 --ab "|$tm=8|$tm=16|$tm=32" --measures fwd --head-dims 64 \
  --seqlens 2048 4096 --causal 1 --rounds 9
# 3. The hf bench alone (no model tests), with the untimed settle round and alternating
#    rounds (ce55a53): the 2k forward read 0.78x / 0.95x / 0.95x sdpa in session 41's runs
#    with the first timed backend regrowing the allocator's cache. Prediction: 2k forward
#    0.95-1.0x (host-bound), 8k / 32k unchanged (1.02x).
ft bench --suite hf --hf-reps 3 --commit "$commit" --csv "$out/bench_hf.csv" \
  >"$out/bench_hf.log" 2>&1 || status=1
tail -n 14 "$out/bench_hf.log"
