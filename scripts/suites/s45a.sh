# gpu_check.sh suite "s45a" (sourced; $out, $commit, ft() and status are set)
# For session 45: s44d's window / softcap tests through the public call after af1efec
# (152), now with their own _launch spy back (774adb0 had shadowed it; fixed in 45), and
# the tests that use the shared Gluon launch spy (_record_gluon_launches /
# _record_kernels) since 774adb0: persistent windows / softcaps with and without the
# lag flags, the split ring without an O stage, hd 256 stage C, k2v3, stage A tile-major
# (~428 tests), 12 workers.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s45a 420 12 8 tests/test_hopper.py \
  -k "((window or softcap) and 128 and not persistent_window and not compiles) or persistent_window_softcap or split_no_o_stage or hd256_stage_c_vs_reference or k2v3 or stage_a_tile_major"
