# gpu_check.sh suite "s45b" (sourced; $out, $commit, ft() and status are set)
# For session 45: does a cell's time move with the SM clock between rounds? In the perf
# runs of sessions 43-45 flashtile's round 1 was often the fastest (hd 64 / 128
# non-causal 4k / 16k: 4-10% ahead of rounds 2-3) and the floor verdicts flip between
# runs. nvidia-smi samples clock / power / temperature every 25 ms beside two benches
# with a timing log (scripts/clock_join.py joins them): every backend as in `perf`, then
# flashtile and cuDNN alone (the floor run's pair), at hd 64 / 128, 4k / 16k, causal and
# not, 3 rounds each. Prediction: where a flashtile round is 4-10% slower than its first,
# its mean SM clock is lower by about as much, with the power-cap reason set; if the clock
# is level while the time moves, the cause is not the clock (memory placement, L2 state).
source scripts/suites/lib/steps.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 25 >"$out/smi.csv" 2>"$out/smi.err" &
smi=$!
ft bench --rounds 3 --commit "$commit" --head-dims 64 128 --seqlens 4k 16k \
  --csv "$out/bench_all.csv" --timing-log "$out/timings_all.jsonl" \
  >"$out/bench_all.log" 2>&1 || status=1
ft bench --rounds 3 --commit "$commit" --head-dims 64 128 --seqlens 4k 16k \
  --backends flashtile sdpa-cudnn \
  --csv "$out/bench_pair.csv" --timing-log "$out/timings_pair.jsonl" \
  >"$out/bench_pair.log" 2>&1 || status=1
kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
for run in all pair; do
  python3 scripts/clock_join.py --smi "$out/smi.csv" --timings "$out/timings_$run.jsonl" \
    --csv "$out/clocks_$run.csv" >"$out/clocks_$run.log" 2>&1 || status=1
done
tail -n 20 "$out/bench_all.log"; tail -n 10 "$out/bench_pair.log"
python3 - "$out" <<'PY'
import csv, statistics, sys
for run in ("all", "pair"):
    rows = list(csv.DictReader(open(f"{sys.argv[1]}/clocks_{run}.csv")))
    print(f"== {run}: ms / MHz / W per round (flashtile, sdpa-cudnn)")
    cells = {}
    for r in rows:
        if r["backend"] in ("flashtile", "sdpa-cudnn"):
            cells.setdefault((r["shape"], r["causal"], r["mode"]), []).append(r)
    for (shape, causal, mode), rs in cells.items():
        txt = "  ".join(f"{r['backend'][:4]}{r['round']} {float(r['ms']):.3f}/"
                        f"{float(r['mhz'] or 0):.0f}/{float(r['watts'] or 0):.0f}" for r in rs)
        print(f"{shape}{' c' if causal == 'True' else ''} {mode}: {txt}"[:230])
PY
