# gpu_check.sh suite "varlenhost" (sourced; $out, $commit, ft() and status are set)
# (The host-descriptor mode this suite measured was removed in session 16: it ran 0.60-0.97x
# the per-program descriptors. The env var it sets is now ignored.)
# Prepared in session 14, not yet run: the varlen Gluon forward over the host descriptors
# (FLASHTILE_HOPPER_VARLEN_DESC=host, opt-in; hopper_fwd.varlen_desc_mode): stage A with
# the packed tensors' own descriptors and each sequence's first rows in the coordinates,
# O stored masked, the ragged last key tile end-aligned, no device-side descriptor (ptxas
# sm_90: hd 64 capped at 128 registers, 0 B of spills non-causal and 68 B causal against
# the per-program-descriptor build's 0 / 48; no global scratch). Its GPU tests, then `bench --suite varlen --quick` three ways: the Gluon
# varlen forward with per-program descriptors (FLASHTILE_HOPPER_VARLEN=1), with the host
# descriptors (=1 and DESC=host; stage A forced so every head dim takes it) and the
# portable kernel (=0). (SCHEDULE=A also moves the dense column to stage A.)
# Prediction: at 2k-long sequences the host-descriptor forward at 1.0-1.2x the portable
# varlen kernel (the device-descriptor one: 0.47-0.91x, varlengluon / ac7393a), and
# within 5% of the device-descriptor one at 8k. ~4 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_varlenhost 120 8 8 tests/test_varlen.py -k "host_desc"
for mode in device host portable; do
  case $mode in
    device) env="FLASHTILE_HOPPER_VARLEN=1 FLASHTILE_HOPPER_SCHEDULE=A" ;;
    host) env="FLASHTILE_HOPPER_VARLEN=1 FLASHTILE_HOPPER_SCHEDULE=A FLASHTILE_HOPPER_VARLEN_DESC=host" ;;
    portable) env="FLASHTILE_HOPPER_VARLEN=0" ;;
  esac
  # shellcheck disable=SC2086
  env $env timeout 90 python3 -m flashtile.cli bench --suite varlen --quick \
    --commit "$commit" --csv "$out/bench_varlen_$mode.csv" >"$out/bench_varlen_$mode.log" 2>&1 \
    || status=1
  echo "== $mode ($env)"; grep -E "^(64|128) " "$out/bench_varlen_$mode.log" | cut -c1-130
done
