#!/usr/bin/env bash
# One call on the GPU machine (an H200 through the device tool):
#   scripts/gpu_check.sh SUITE[,SUITE...] [COMMIT]
# installs flashtile there (offline: no deps, no build isolation), runs the suite's GPU
# tests and commands, writes full logs under $OUT (or ./out) and prints a short table last.
# Suites (each under 7 minutes), one file each in scripts/suites/SUITE.sh:
#   core    gpu tests (full validation grid, compile, recompiles) + flashtile validate
#           + a forward bench at the DESIGN.md shapes
#   perf    flashtile bench: every backend, forward and forward+backward, figure
#           + the floor pair sustained (suite floor)
#   floor   issue 4's floor pair (flashtile, cuDNN, hd 64 / 128, 4k / 16k) sustained, ~100 s
#   tune    config sweeps (scripts/tune.py), forward and backward
#   ladder  flashtile ladder: every rung, table, CSV and figures
#   decode  varlen + KV-cache gpu tests, bench suites varlen and decode (GB/s, split-KV,
#           paged-memory table + PNG)
#   hopper  the Gluon sm_90 forward: compile report, gpu tests, TFLOPS vs portable/cuDNN
#   train   MiniGPT on Tiny Shakespeare: gpu tests, `flashtile train` per backend, step
#           time vs SDPA cuDNN/flash, a sample, loss figure (needs data/ carried along)
#   models  GPT-2: tests, generate --selftest, gpt2-check 124M (checkpoint + loader) and
#           XL (in memory) fp32/bf16, generation tok/s vs HF generate() (bench gpt2)
#   hf      transformers attn_implementation: bf16 model tests, ~1B Llama forward /
#           train step / decode tokens/s vs sdpa (bench hf), < 5 min
#   verify  every gpu test beyond the foundation's grid, one pytest pool, no benches
#   ring    ring attention: tests/test_ring.py, bench --suite ring as one process and
#           through torchrun (a ring of one on the one GPU), < 3 min
#   ring2   ring attention on 2 GPUs (nvidia-h200-x2, NCCL): torchrun bench --suite ring
#           --ring-check, weak scaling 8k-64k/GPU, strong 128k-1M, vs 1 GPU and torch CP,
#           ~4 min
#   dispatch  after a dispatch-table change: validate, fwd+bwd bench vs cuDNN/flash, the
#           ladder's headline rungs (v1, portable, production at 4k/16k), ~5 min
#   ncu     Nsight Compute counters per ladder rung (scripts/ncu_ladder.py), ~1-2 min
#   smoke   the production op's small-shape tests on the GPU (no full grid), ~2 min
#   gpt2check  gpt2-check alone: 124M (saved, our loader) and XL (in memory), fp32/bf16
#   fusedbwd  the Gluon backward, two-kernel and fused: gpu tests, bench vs portable / cuDNN
#   bwdsweep  tiles of the two-kernel Gluon backward at hd 128 (bench_hopper_bwd --config)
#   dropout   smoke tests, MiniGPT step bench, HF 2k forward with the cached launch on/off
#   bwdvscudnn  ncu of flashtile's and cuDNN's backward, hd 64 / 128, 4k / 16k, ~3-4 min
#   varlenhost  the varlen forward over host descriptors (opt-in): tests, bench 3 ways, ~4 min
#   ckfirst   stage C waiting for K before its turn (opt-in): tests, A/B at hd 128 / 256, ~4 min
# Two streams at once on the 2-GPU machine: scripts/gpu_pair.sh COMMIT "S0" "S1".
set -uo pipefail
suite=${1:-core}
# pass the commit: the machine's .git may be stale (a tree differing from it says -dirty)
commit=${2:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
out=${OUT:-$PWD/out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

if [ -z "${GPU_CHECK_NO_INSTALL:-}" ]; then
  python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 \
    || echo "pip install failed (see install.log); using PYTHONPATH=src"
fi
{
  echo "commit $commit"
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} | tee "$out/env.txt"
ft() { python3 -m flashtile.cli "$@"; }
status=0

# SUITE may name several, comma-separated (one machine start for all of them).
overall=0
for one in ${suite//,/ }; do
  if [ ! -f "scripts/suites/$one.sh" ]; then
    echo "unknown suite '$one' (have: $(cd scripts/suites && ls -- *.sh | sed 's/\.sh$//' | tr '\n' ' '))"; exit 2
  fi
  status=0
  t0=$SECONDS
  # shellcheck source=/dev/null
  source "scripts/suites/$one.sh"
  echo "suite $one: $([ $status -eq 0 ] && echo PASS || echo FAIL) in $((SECONDS - t0)) s (logs in $out)"
  [ $status -eq 0 ] || overall=1
done
# The device tool brings back at most 8 files from $OUT: past that, one archive of all
# of them (extract with tar xzf; figures and CSVs included)
if [ "$(find "$out" -type f | wc -l)" -gt 8 ]; then
  pack=$(mktemp -d)/logs.tar.gz
  tar czf "$pack" -C "$out" . && find "$out" -mindepth 1 -delete && mv "$pack" "$out/" \
    && echo "logs packed into $out/logs.tar.gz"
fi
exit $overall
