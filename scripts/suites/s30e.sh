# gpu_check.sh suite "s30e" (sourced; $out, $commit, ft() and status are set)
# Session 30: where the hd 64 non-causal backward's time goes (forward+backward 0.91-0.93x
# cuDNN at 7db4c84, the widest gap at hd 64 / 128 from 4k), with every ncu section
# (--set full) on the two-kernel dK/dV and dQ kernels at 4k (16k tokens), and the SASS
# source page of each (per-instruction stall samples); cuDNN's backward at the same shape
# for its issue / shared-memory / pipe counters. Evidence for the next change, no A/B.
# Prediction (session 30's kv_regs run: K / V from registers lost, so shared-memory
# bandwidth is not the limit): the dK/dV kernel's tensor pipe at ~55%, its top stalls
# on the wgmma waits (the step's GEMM chain: S^T -> P^T -> dV, dP^T -> dS^T -> dK, each
# waited before the next is issued) rather than on shared memory (MIO) or issue slots.
ncu_full() {  # TAG BACKEND KERNEL_REGEX
  local tag=$1 backend=$2 regex=$3
  timeout 240 ncu --clock-control none --profile-from-start off --set full \
    -k "regex:$regex" -o "$out/$tag" -f \
    python3 scripts/ncu_ladder.py run --backward --backend "$backend" --seqlen 4096 \
    --head-dim 64 >"$out/$tag.log" 2>&1 || { echo "ncu $tag failed"; tail -n 5 "$out/$tag.log"; status=1; return; }
  ncu -i "$out/$tag.ncu-rep" --csv --page raw >"$out/${tag}_raw.csv" 2>>"$out/$tag.log" || status=1
  ncu -i "$out/$tag.ncu-rep" --page details >"$out/${tag}_details.txt" 2>>"$out/$tag.log" || status=1
  if [ "$backend" = flashtile ]; then
    ncu -i "$out/$tag.ncu-rep" --csv --page source --print-source sass \
      >"$out/${tag}_sass.csv" 2>>"$out/$tag.log" || echo "source page failed ($tag)"
  fi
  rm -f "$out/$tag.ncu-rep"
  echo "$tag: $(wc -c <"$out/${tag}_raw.csv") B raw, $(wc -c <"$out/${tag}_details.txt") B details"
}
ncu_full ft64 flashtile "_bwd_dkdv_kernel|_bwd_dq_kernel"
ncu_full cudnn64 sdpa-cudnn "."
grep -E "^  [a-zA-Z_]+.*(Duration|Issue Slots Busy|Compute \(SM\) Throughput|Shared Memory|No Eligible|Active Warps Per Scheduler|Eligible Warps)" \
  "$out/ft64_details.txt" | head -40
