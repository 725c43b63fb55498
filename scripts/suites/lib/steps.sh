# Sourced by gpu_check.sh suites: the two steps most of them run.
# gpu_pytest LOG LIMIT NPROC TAIL PYTEST_ARGS...: the GPU tests PYTEST_ARGS select, on
# NPROC xdist workers under LIMIT seconds, log $out/LOG.log; prints the failures and the
# count line (last TAIL lines). Sets status=1 on a failure or the time limit.
gpu_pytest() {
  local log=$1 limit=$2 nproc=$3 lines=$4
  shift 4
  cuda_pytest "$log" "$limit" "$lines" -m gpu -n "$nproc" "$@"
}
# cuda_pytest LOG LIMIT TAIL PYTEST_ARGS...: the same for tests without the gpu mark (they
# run on CUDA where there is one, e.g. tests/test_fixed_dq.py), one process.
cuda_pytest() {
  local log=$1 limit=$2 lines=$3
  shift 3
  timeout "$limit" python3 -m pytest -q "$@" -p no:cacheprovider -rf \
    --tb=short >"$out/$log.log" 2>&1 || status=1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/$log.log" | tail -n "$lines"
}
# env_ab LOG LIMIT ENV_AB_ARGS...: scripts/env_ab.py (interleaved A/B rounds through the
# public call) under LIMIT seconds, CSV $out/LOG.csv, log $out/LOG.log; prints the log
# without blank lines. Sets status=1 on a failure or the time limit.
env_ab() {
  local log=$1 limit=$2
  shift 2
  timeout "$limit" python3 scripts/env_ab.py "$@" --csv "$out/$log.csv" \
    >"$out/$log.log" 2>&1 || status=1
  grep -vE "^\s*$" "$out/$log.log" | cut -c1-230
}
# bench_fwd LOG LIMIT TITLE ARGS...: scripts/bench_hopper.py ARGS (CSV $out/LOG.csv, log
# $out/LOG.log); prints TITLE, any mismatch or error, and the TFLOPS rows. Environment
# variables set on the call (a forced path) reach the bench.
bench_fwd() {
  local log=$1 limit=$2 title=$3
  shift 3
  timeout "$limit" python3 scripts/bench_hopper.py "$@" --csv "$out/$log.csv" \
    >"$out/$log.log" 2>&1 || status=1
  echo "== $title"
  grep -E "MISMATCH|rror" "$out/$log.log" | head -3
  grep -E "^B[0-9]+ S" "$out/$log.log" | grep -vE "config|diff|ms " | cut -c1-120
}
# validate_covering LOG LIMIT: `flashtile validate --grid covering`, log $out/LOG.log;
# prints its last lines without the progress bar.
validate_covering() {
  timeout "$2" python3 -m flashtile.cli validate --grid covering >"$out/$1.log" 2>&1 \
    || status=1
  tr '\r' '\n' <"$out/$1.log" | grep -v "it/s\]$" | tail -n 3
}
# validate_covering_tail LOG LIMIT FIRST [HEAD_DIMS]: the covering grid's cases from FIRST
# (1-based) on, as `flashtile validate --grid covering` runs them (batch 2), log
# $out/LOG.log: the rest of a run its time limit cut, or (HEAD_DIMS, e.g. "64,128") only
# those head dims' cases; environment variables set on the call (a forced path) reach
# the cases. Prints the failures (5 at most) and the count line.
validate_covering_tail() {
  timeout "$2" python3 - "$3" "${4:-}" >"$out/$1.log" 2>&1 <<'PY' || status=1
import sys
import torch
from flashtile.validate import case_grid, run_case, with_
first = int(sys.argv[1])
dims = {int(d) for d in sys.argv[2].split(",") if d}
cases = [with_(c, batch=2) for c in case_grid(full=False)][first - 1:]
cases = [c for c in cases if not dims or c.head_dim in dims]
bad = 0
for c in cases:
    r = run_case(c, torch.device("cuda"))
    bad += not r.ok
    print(c.name, "ok" if r.ok else "FAILED " + r.summary(), flush=True)
what = f"hd {sys.argv[2]}" if dims else f"cases {first}-{first - 1 + len(cases)}"
print(f"covering grid {what}: {len(cases) - bad} passed, {bad} failed")
raise SystemExit(1 if bad else 0)
PY
  grep -E "FAILED" "$out/$1.log" | head -5
  tail -n 1 "$out/$1.log"
}
# dropout_gpu_tests: the dropout GPU tests of sessions 18-19: the Gluon forward's
# (test_hopper_dropout.py), the Gluon backward's (-k dropout), test_flash's dropout / bits
# / capture / plan tests on CUDA (the whole file's tests that run there, GPU-marked or
# not), MiniGPT's GPU tests.
dropout_gpu_tests() {
  gpu_pytest pytest_hopper_dropout 240 4 6 tests/test_hopper_dropout.py
  gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
  timeout 240 python3 -m pytest -q tests/test_flash.py -k "dropout or graph_capture or plans or bits" \
    -p no:cacheprovider -rf --tb=short >"$out/pytest_flash_cuda.log" 2>&1 || status=1
  grep -E "^FAILED|passed|failed" "$out/pytest_flash_cuda.log" | tail -n 4
  gpu_pytest pytest_minigpt 150 2 4 tests/test_minigpt.py
}
# dropout_bits_ab TAG [BENCH_DROPOUT_ARGS...]: scripts/bench_dropout.py with
# FLASHTILE_DROPOUT_BITS=0, then =1 (two processes), logs and CSVs $out/TAG{0,1}.*; prints
# the dropout-0.2 rows (and, with --kernels, each one's per-kernel line).
dropout_bits_ab() {
  local tag=$1 bits
  shift
  for bits in 0 1; do
    FLASHTILE_DROPOUT_BITS=$bits timeout 150 python3 scripts/bench_dropout.py "$@" \
      --csv "$out/$tag$bits.csv" >"$out/$tag$bits.log" 2>&1 || status=1
    echo "== FLASHTILE_DROPOUT_BITS=$bits"
    grep -A1 "| 0.2 |" "$out/$tag$bits.log" | grep -E "\| 0\.2 \||per kernel" | cut -c1-300
  done
}
# dropout_kernels TAG [VAR=VALUE ...] [-- BENCH_DROPOUT_ARGS...]: scripts/bench_dropout.py
# --kernels (flashtile and cuDNN unless the args name --backends) under those environment
# variables, log / CSV $out/TAG.*; prints the dropout-0.2 rows and their per-kernel lines.
dropout_kernels() {
  local tag=$1 envs=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  echo "== $tag ${envs[*]}"
  timeout 100 env "${envs[@]}" python3 scripts/bench_dropout.py --kernels \
    --backends flashtile,cudnn "$@" --csv "$out/$tag.csv" >"$out/$tag.log" 2>&1 || status=1
  grep -A1 "| 0.2 |" "$out/$tag.log" | grep -E "\| 0\.2 \||per kernel" | cut -c1-250
}
# graph_step TAG BACKENDS: the graphed MiniGPT step of BACKENDS (train --bench names,
# NAME[:graph][@VAR=VALUE]) in the same interleaved rounds (80 steps in 8) at 64 x 256
# and 16 x 1024, log / CSV $out/TAG.*; prints the table.
graph_step() {
  timeout 150 python3 -m flashtile.cli train --bench --bench-backends "$2" \
    --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
    --csv "$out/$1.csv" >"$out/$1.log" 2>&1 || status=1
  tail -n $(( $(tr -cd , <<<"$2" | wc -c) * 2 + 3 )) "$out/$1.log" | cut -c1-120
}
# graph_step_bits: flashtile and SDPA cuDNN, and flashtile with FLASHTILE_DROPOUT_BITS=1
graph_step_bits() {
  graph_step train_bench_bits \
    "flashtile:graph,sdpa-cudnn:graph,flashtile:graph@FLASHTILE_DROPOUT_BITS=1"
}
# dropout_benches BACKENDS: with the shipped dropout default, flashtile's and cuDNN's
# training call per kernel ($out/drop_k.*), then the graphed step of BACKENDS
# ($out/train_bench.*)
dropout_benches() {
  dropout_kernels drop_k
  graph_step train_bench "$1"
}
# dropout_default_benches: dropout_benches with flashtile drawing (FLASHTILE_DROPOUT_BITS=0)
dropout_default_benches() {
  dropout_benches "flashtile:graph,flashtile:graph@FLASHTILE_DROPOUT_BITS=0,sdpa-cudnn:graph"
}
# dropout_kernels_step: dropout_benches, flashtile against cuDNN
dropout_kernels_step() {
  dropout_benches "flashtile:graph,sdpa-cudnn:graph"
}
# clock_log_start FILE: nvidia-smi samples the SM clock, board power, temperature and the
# clock-event reasons every 25 ms into $out/FILE until clock_log_stop (nvidia-smi's
# values move about every 100 ms); scripts/clock_join.py joins it with a bench's
# --timing-log (session 45: the GPU times at its power cap, its clock moving 1425-1980 MHz).
clock_log_start() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms 25 >"$out/$1" 2>"$out/$1.err" &
  clock_log_pid=$!
}
clock_log_stop() {
  kill "$clock_log_pid" 2>/dev/null
  wait "$clock_log_pid" 2>/dev/null
  return 0
}
