# gpu_check.sh suite "s42e" (sourced; $out, $commit, ft() and status are set)
# For session 42, after the launch plans (7ae0dfa) and tile-major from 4k (7b21010): GPU
# tests that call the public API repeatedly through the Gluon path with plans on (the
# validation grid through the shipped schedule, MiniGPT's and GPT-2's), under 180 s.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s42e 170 8 12 tests/test_hopper.py tests/test_minigpt.py \
  tests/test_gpt2.py -k "hopper_vs_reference or minigpt or gpt2"
