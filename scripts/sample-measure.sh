#!/usr/bin/env bash
# Measures entries of CI's mutant sample as docs/RELIABILITY.md ("CI's sample") asks before an
# entry joins it: each entry run N times as CI runs it (its plan with the gate as built, then
# with the mutant), quiet or beside a load (SAMPLE_BUSY busy loops, default 2; two instances of
# this script side by side, each with one, are a heavier load than CI's), one line per run.
#
#   scripts/sample-measure.sh quiet 10 17:readiness:missing 15:catalog-hold-off
#   scripts/sample-measure.sh load 5 17:readiness:missing
#
# An entry is MAJOR:MUTANT, as in mutantSample (integration/explore/mutants_test.go). A line says
# "killed" (by the first or the second run of the mutant), "missed" (neither), or "gate failed"
# (the gate as built failed the plan: the kill would mean nothing). Run it alone: anything else
# on the machine is load.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
usage() { echo "usage: $0 quiet|load N MAJOR:MUTANT..." >&2; exit 3; }
[ $# -ge 3 ] || usage
cond=$1 n=$2
shift 2
case $cond in quiet | load) ;; *) usage ;; esac
[[ $n =~ ^[1-9][0-9]*$ ]] || usage

busy=()
stop_busy() { [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true; busy=(); }
trap stop_busy EXIT
for entry in "$@"; do
  major=${entry%%:*} name=${entry#*:}
  [[ $major =~ ^[0-9]+$ && $name != "$entry" ]] || usage
  "$repo/scripts/fetch-postgres.sh" "$major" >/dev/null
  for i in $(seq 1 "$n"); do
    if [ "$cond" = load ]; then
      for _ in $(seq 1 "${SAMPLE_BUSY:-2}"); do yes >/dev/null & busy+=($!); done
    fi
    start=$(date +%s)
    out=$(SLOTSYNC_PG_MAJORS=$major go test -count=1 -timeout 20m -run "TestMutationMatrix\$/^pg$major\$/^$name\$" -v ./integration/explore/ 2>&1) || true
    stop_busy
    took=$(($(date +%s) - start))
    if grep -q 'the gate as built fails' <<<"$out"; then
      verdict="gate failed"
    elif by=$(grep -o 'killed=true plan [0-9] of [0-9]' <<<"$out" | head -1) && [ -n "$by" ]; then
      verdict="killed by mutant run ${by#killed=true plan }"
    elif grep -q 'killed=false' <<<"$out"; then
      verdict="missed"
    else
      verdict="no verdict (see go test's output)"
      tail -20 <<<"$out" >&2
    fi
    echo "$(date -u +%H:%M:%S) $cond pg$major $name run $i: $verdict (${took}s)"
  done
done
