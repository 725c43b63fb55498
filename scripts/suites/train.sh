# gpu_check.sh suite "train" (sourced; $out, $commit, ft() and status are set)
# MiniGPT on Tiny Shakespeare (issue 7): the tests of tests/test_minigpt.py, one
# `flashtile train --cuda-graph` per backend at the shakespeare-char preset (same seed),
# the training-step comparison (flashtile vs SDPA cuDNN vs SDPA flash, graphed and eager,
# tokens/s), a sample,
# the loss-curve figure of both runs, and a short table last. Checkpoints (~130 MB
# each) stay on the machine; logs, figures, CSV and the sample come back in $out.
data=../shared/data/tinyshakespeare.txt
[ -f data/tinyshakespeare.txt ] && data=data/tinyshakespeare.txt
runs=${TMPDIR:-/tmp}/minigpt_runs
rm -rf "$runs"
mkdir -p "$runs"

# every test of the file: the gpu/slow ones, and the CPU ones on cuda (fp32 flashtile,
# dropout, bitwise resume)
python3 -m pytest -q tests/test_minigpt.py -p no:cacheprovider -rf --tb=short \
  --durations=5 >"$out/pytest_train.log" 2>&1 || status=1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/pytest_train.log" | tail -n 20

for backend in flashtile sdpa-cudnn; do
  ft train --preset shakespeare-char --backend "$backend" --data "$data" --seed 1337 \
    --cuda-graph --out "$runs/$backend" --no-progress >"$out/train_$backend.log" 2>&1 || status=1
  if [ "$backend" = sdpa-cudnn ] && [ ! -f "$runs/$backend/log.json" ]; then
    echo "SDPA cuDNN run failed (see train_sdpa-cudnn.log); PyTorch's default SDPA instead"
    ft train --preset shakespeare-char --backend sdpa --data "$data" --seed 1337 \
      --out "$runs/$backend" --no-progress >>"$out/train_$backend.log" 2>&1 || status=1
  fi
  tail -n 3 "$out/train_$backend.log"
  cp "$runs/$backend/log.json" "$out/train_$backend.json" 2>/dev/null
  cp "$runs/$backend/loss.png" "$out/train_loss_$backend.png" 2>/dev/null
done

# the step per backend, graphed (what the runs above time) and eager, in interleaved rounds
ft train --bench --bench-backends \
  flashtile:graph,sdpa-cudnn:graph,sdpa-flash:graph,flashtile,sdpa-cudnn \
  --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
  --csv "$out/train_bench.csv" >"$out/train_bench.log" 2>&1 || status=1
tail -n 13 "$out/train_bench.log" | cut -c1-120

ft sample --ckpt "$runs/flashtile" --prompt "ROMEO:" --max-new-tokens 400 --seed 1337 \
  --out "$out/train_sample.txt" >"$out/train_sample.log" 2>&1 || status=1

python3 - "$out" "$commit" <<'EOF' || status=1
import csv, json, sys
from pathlib import Path
from flashtile.models.train import plot_loss_curves
out, commit = Path(sys.argv[1]), sys.argv[2]
runs = {b: json.loads((out / f"train_{b}.json").read_text())
        for b in ("flashtile", "sdpa-cudnn") if (out / f"train_{b}.json").exists()}
if runs:
    labels = [r["summary"]["backend"] for r in runs.values()]
    plot_loss_curves(list(runs.values()), out / "train_loss.png", labels=labels,
                     title=f"MiniGPT 6L/6H/384, Tiny Shakespeare, H200 ({commit})")
print(f"\nMiniGPT shakespeare-char, commit {commit}")
print(f"{'backend':<11} {'best val':>8} {'@step':>6} {'final val':>9} {'train s':>8} "
      f"{'warm-up s':>9} {'ms/step':>8} {'tokens/s':>10}")
for r in runs.values():
    s = r["summary"]
    print(f"{s['backend']:<11} {s['best_val']:>8.4f} {s['best_step']:>6} {s['final_val']:>9.4f} "
          f"{s['train_s']:>8.1f} {s['warmup_s']:>9.1f} {s['step_ms']:>8.2f} "
          f"{s['tokens_per_s']:>10.4g}")
bench = out / "train_bench.csv"
if bench.exists():
    rows = list(csv.DictReader(bench.open()))
    print(f"\n{'step time':<18} {'batch x ctx':>11} {'ms/step':>8} {'tokens/s':>10} "
          f"{'vs cuDNN':>8}")
    for r in rows:
        print(f"{r['backend']:<18} {r['batch'] + 'x' + r['ctx']:>11} "
              f"{float(r['ms_per_step']):>8.2f} {float(r['tokens_per_s']):>10.4g} "
              f"{float(r['ratio_vs_cudnn']):>8.3f}")
sample = out / "train_sample.txt"
if sample.exists():
    print("\nsample (flashtile, best checkpoint, T=0.8, top-k 200):")
    print("\n".join(sample.read_text().splitlines()[:8]))
EOF
