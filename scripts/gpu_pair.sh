#!/usr/bin/env bash
# Two gpu_check.sh streams at once on a 2-GPU machine (nvidia-h200-x2), one per GPU:
#   scripts/gpu_pair.sh COMMIT "SUITES_FOR_GPU0" "SUITES_FOR_GPU1"
# Each stream is `CUDA_VISIBLE_DEVICES=i scripts/gpu_check.sh SUITES COMMIT` with its logs
# in $OUT/gpuI, each under $PAIR_TIMEOUT s (default 560: the tool's 600 s call limit), (tarred into $OUT/logs.tgz: the device tool returns at most 8 files).
# The two GPUs share nothing but the host (32 cores), so each stream's timings are its
# GPU's own; host-bound numbers (batch-1 decode) may see the other stream's CPU load.
set -uo pipefail
commit=$1
out=${OUT:-$PWD/out}
work=$(mktemp -d)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$work/install.log" 2>&1
export GPU_CHECK_NO_INSTALL=1
pids=()
for i in 0 1; do
  suites=${2:-}; [ "$i" = 1 ] && suites=${3:-}
  [ -n "$suites" ] || continue
  mkdir -p "$work/gpu$i"
  CUDA_VISIBLE_DEVICES=$i OUT="$work/gpu$i" timeout "${PAIR_TIMEOUT:-560}" bash scripts/gpu_check.sh "$suites" "$commit" \
    >"$work/gpu$i/stream.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
tar czf "$out/logs.tgz" -C "$work" . 2>/dev/null
for i in 0 1; do
  [ -f "$work/gpu$i/stream.log" ] || continue
  echo "================ GPU $i"
  cat "$work/gpu$i/stream.log"
done
exit $rc
