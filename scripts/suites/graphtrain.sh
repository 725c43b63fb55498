# gpu_check.sh suite "graphtrain" (sourced; $out, $commit, ft() and status are set)
# Issue 7: the MiniGPT step as one CUDA graph replay (models/graphed.py, `train
# --cuda-graph`, `train --bench NAME:graph`), so both backends run at the GPU's pace
# rather than the host's. Needs the data carried: data/tinyshakespeare.txt (carry "data").
# 1. GPU tests: graph vs eager (fp32 / bf16, both backends), dropout per replay, train()
#    with evaluations, checkpoints and a bitwise resume.
# 2. The step bench, eager and graphed in the same interleaved rounds, and flashtile
#    graphed with dropout bits (FLASHTILE_DROPOUT_BITS=1).
#    Prediction (stepgpu, 3c3cd95: kernels 7.10 ms flashtile / 6.77 cuDNN per step at
#    64 x 256, 8.73 / 7.71 at 16 x 1024): graphed steps at 7-8 ms / 8-9 ms, the ratio to
#    cuDNN graphed near the kernel ratio, 0.93-0.97x / 0.87-0.90x; bits +0.02-0.05.
# 3. `flashtile train --cuda-graph` per backend, same seed: val <= 1.47, train seconds.
# ~5 min.
source scripts/suites/lib/steps.sh
data=../shared/data/tinyshakespeare.txt
[ -f data/tinyshakespeare.txt ] && data=data/tinyshakespeare.txt
runs=${TMPDIR:-/tmp}/minigpt_graph_runs
rm -rf "$runs"
mkdir -p "$runs"
gpu_pytest pytest_graphstep 240 2 8 tests/test_minigpt.py -k "graph"
timeout 200 python3 -m flashtile.cli train --bench \
  --bench-backends "flashtile,sdpa-cudnn,flashtile:graph,sdpa-cudnn:graph,flashtile:graph@FLASHTILE_DROPOUT_BITS=1" \
  --bench-shapes 64x256,16x1024 --bench-steps 60 --bench-rounds 6 \
  --csv "$out/train_bench_graph.csv" >"$out/train_bench_graph.log" 2>&1 || status=1
tail -n 12 "$out/train_bench_graph.log" | cut -c1-120
for backend in flashtile sdpa-cudnn; do
  timeout 120 python3 -m flashtile.cli train --preset shakespeare-char --backend "$backend" \
    --cuda-graph --data "$data" --seed 1337 --out "$runs/$backend" --no-progress \
    >"$out/train_graph_$backend.log" 2>&1 || status=1
  echo "== train --cuda-graph --backend $backend"
  tail -n 2 "$out/train_graph_$backend.log" | cut -c1-200
  cp "$runs/$backend/log.json" "$out/train_graph_$backend.json" 2>/dev/null
done
