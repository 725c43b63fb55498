# gpu_check.sh suite "s45c" (sourced; $out, $commit, ft() and status are set)
# For session 45, after s45b: the H100 sits at its 700 W cap in steady timing, its SM
# clock swinging 1425-1980 MHz with what ran just before (round 1, after the idle setup,
# at 1900-1980), so a cell's time depends on its place in the sequence. Here every
# timing is preceded by 600 ms of the same call back to back (`--settle-ms 600`), so each
# backend is timed in its own steady state at the cap: issue 4's floor pair (flashtile,
# cuDNN), hd 64 / 128, 4k / 16k, causal and not, 3 rounds, with the clock log.
# Prediction: round-to-round spreads fall to <= 3%, and the fwd+bwd ratios settle near
# s45b's rounds 2-3 (hd 64 non-causal 0.93-0.96x, hd 128 non-causal 0.93-0.95x).
source scripts/suites/lib/steps.sh
clock_log_start smi.csv
ft bench --rounds 3 --settle-ms 600 --commit "$commit" --head-dims 64 128 --seqlens 4k 16k \
  --backends flashtile sdpa-cudnn \
  --csv "$out/bench_settle.csv" --timing-log "$out/timings_settle.jsonl" \
  >"$out/bench_settle.log" 2>&1 || status=1
clock_log_stop
python3 scripts/clock_join.py --smi "$out/smi.csv" --timings "$out/timings_settle.jsonl" \
  --csv "$out/clocks_settle.csv" >"$out/clocks_settle.log" 2>&1 || status=1
tail -n 20 "$out/bench_settle.log"
# is NVML's energy counter reachable from Python here (joules per call, next step)?
python3 -c "import pynvml as n; n.nvmlInit(); h = n.nvmlDeviceGetHandleByIndex(0); \
print('nvml energy mJ', n.nvmlDeviceGetTotalEnergyConsumption(h))" 2>&1 | tail -n 1
