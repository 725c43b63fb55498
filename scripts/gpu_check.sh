#!/usr/bin/env bash
# One call on the GPU machine (an H200 through the device tool):
#   scripts/gpu_check.sh SUITE [COMMIT]
# installs flashtile there (offline: no deps, no build isolation), runs the suite's GPU
# tests and commands, writes full logs under $OUT (or ./out) and prints a short table last.
# Suites (each under 7 minutes):
#   core    gpu tests (full validation grid, compile, recompiles) + flashtile validate
#           + a forward bench at the DESIGN.md shapes
#   perf    flashtile bench: every backend, forward and forward+backward, figure
#   tune    config sweeps (scripts/tune.py), forward and backward
#   ladder  flashtile ladder: every rung, table, CSV and figures
set -uo pipefail
suite=${1:-core}
commit=${2:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
out=${OUT:-$PWD/out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 \
  || echo "pip install failed (see install.log); using PYTHONPATH=src"
{
  echo "commit $commit"
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} | tee "$out/env.txt"
ft() { python3 -m flashtile.cli "$@"; }
status=0

case "$suite" in
  core)
    python3 -m pytest -q -m gpu -n 4 tests/ -p no:cacheprovider --durations=10 \
      >"$out/pytest_gpu.log" 2>&1 || status=1
    tail -n 15 "$out/pytest_gpu.log"
    ft validate --grid covering --csv "$out/validate.csv" >"$out/validate.log" 2>&1 || status=1
    tail -n 16 "$out/validate.log"
    ft bench --no-bwd --backends flashtile sdpa-flash sdpa-cudnn --commit "$commit" \
      --csv "$out/bench_core.csv" >"$out/bench_core.log" 2>&1 || status=1
    tail -n 40 "$out/bench_core.log"
    ;;
  perf)
    ft bench --commit "$commit" --csv "$out/bench_perf.csv" --plot "$out/bench_perf.png" \
      >"$out/bench_perf.log" 2>&1 || status=1
    tail -n 60 "$out/bench_perf.log"
    ;;
  tune)
    python3 scripts/tune.py --seqlens 4096 --csv "$out/tune_fwd.csv" 2>"$out/tune_fwd.err" \
      | tee "$out/tune_fwd.log" || status=1
    python3 scripts/tune.py --bwd --seqlens 4096 --causal 0 --csv "$out/tune_bwd.csv" \
      2>"$out/tune_bwd.err" | tee "$out/tune_bwd.log" || status=1
    ;;
  ladder)
    ft ladder --commit "$commit" --csv "$out/ladder.csv" --figures "$out" \
      >"$out/ladder.log" 2>&1 || status=1
    tail -n 60 "$out/ladder.log"
    ;;
  *)
    echo "unknown suite '$suite' (core, perf, tune, ladder)"; exit 2 ;;
esac
echo "suite $suite: $([ $status -eq 0 ] && echo PASS || echo FAIL) (logs in $out)"
exit $status
