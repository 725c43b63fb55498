# Sourced by gpu_check.sh suites: the two steps most of them run.
# gpu_pytest LOG LIMIT NPROC TAIL PYTEST_ARGS...: the GPU tests PYTEST_ARGS select, on
# NPROC xdist workers under LIMIT seconds, log $out/LOG.log; prints the failures and the
# count line (last TAIL lines). Sets status=1 on a failure or the time limit.
gpu_pytest() {
  local log=$1 limit=$2 nproc=$3 lines=$4
  shift 4
  timeout "$limit" python3 -m pytest -q -m gpu -n "$nproc" "$@" -p no:cacheprovider -rf \
    --tb=short >"$out/$log.log" 2>&1 || status=1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/$log.log" | tail -n "$lines"
}
# validate_covering LOG LIMIT: `flashtile validate --grid covering`, log $out/LOG.log;
# prints its last lines without the progress bar.
validate_covering() {
  timeout "$2" python3 -m flashtile.cli validate --grid covering >"$out/$1.log" 2>&1 \
    || status=1
  tr '\r' '\n' <"$out/$1.log" | grep -v "it/s\]$" | tail -n 3
}
