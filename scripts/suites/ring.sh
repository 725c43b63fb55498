# gpu_check.sh suite "ring" (sourced; $out, $commit, ft() and status are set)
# Context parallelism on the one H200: the ring tests (gloo on the CPU + a ring of one on
# the GPU), the bench as one process (a ring of one: per-block overhead vs the 1-GPU
# kernel, torch's context_parallel beside it) and once through torchrun. Under 3 minutes.
python3 -m pytest -q -m "not slow" tests/test_ring.py -p no:cacheprovider --durations=5 \
  >"$out/pytest_ring.log" 2>&1 || status=1
tail -n 8 "$out/pytest_ring.log"
ft bench --suite ring --commit "$commit" --csv "$out/bench_ring.csv" \
  >"$out/bench_ring.log" 2>&1 || status=1
tail -n 20 "$out/bench_ring.log"
python3 -m torch.distributed.run --standalone --nproc-per-node 1 -m flashtile.cli bench \
  --suite ring --quick --ring-seqlens 8k --ring-local-seqlens 4k --commit "$commit" \
  >"$out/bench_ring_torchrun.log" 2>&1 || status=1
tail -n 12 "$out/bench_ring_torchrun.log"
