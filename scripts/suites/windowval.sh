# gpu_check.sh suite "windowval" (sourced; $out, $commit, ft() and status are set)
# The covering validation grid with the sliding-window path of the Gluon kernels on
# (FLASHTILE_HOPPER_WINDOW=1; opt-in until this and suite "window" pass). ~4 min.
export FLASHTILE_HOPPER_WINDOW=1
timeout 330 python3 -m flashtile.cli validate --grid covering >"$out/validate_window.log" \
  2>&1 || status=1
tr '\r' '\n' <"$out/validate_window.log" | grep -v "it/s\]$" | tail -n 3
unset FLASHTILE_HOPPER_WINDOW
