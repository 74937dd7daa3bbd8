#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz/, clang, ASan + UBSan) and fuzzes
# each for SECONDS (default 300), then prints executions and coverage per
# target. Usage: tools/fuzz.sh [SECONDS] [TARGET...]   (tests/fuzz/README.md)
# The corpus grows in build-fuzz/fuzz-long/<target>/ across runs; findings
# (crash-*, leak-*, timeout-*, oom-*) land there too, and the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
shift || true
jobs=$(nproc 2>/dev/null || echo 2)
CC=clang CXX=clang++ cmake -B build-fuzz -DTRILLION_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$jobs"
targets=("$@")
if [ ${#targets[@]} = 0 ]; then
  targets=($(ls tests/fuzz/corpus))
fi
status=0
printf '%-16s %12s %8s %8s %8s  %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
  work=build-fuzz/fuzz-long/$t
  mkdir -p "$work/corpus"
  log=$work/last.log
  rc=0
  build-fuzz/tests/fuzz/fuzz_$t -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "$work/corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 | tr -dc '0-9 ' | awk '{print $1, $2}')
  result=ok
  if [ "$rc" != 0 ]; then result="FOUND (exit $rc): see $log"; status=1; fi
  printf '%-16s %12s %8s %8s %8s  %s\n' "$t" "${units:-?}" "${speed:-?}" ${cov:-? ?} "$result"
done
exit $status
