# gpu_check.sh suite "gluonab" (sourced; $out, $commit, ft() and status are set)
# Session 10: the cached Gluon launch off / on in one process (scripts/host_split.py
# --ab), interleaved rounds; s10check's numbers compared across runs moved 30% on code
# that had not changed. Gluon shape B2 S640 H16 D128 causal (forward, delta, dK/dV, dQ
# on Gluon). Prediction: launchers -30 to -40 us forward, -60 to -100 us backward.
timeout 150 python3 scripts/host_split.py --ab 2,640,16,128,1 >"$out/host_ab.log" 2>&1 || status=1
grep -E "^[|]" "$out/host_ab.log"
