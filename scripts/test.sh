#!/usr/bin/env bash
# Runs every test on real PostgreSQL pairs of the majors in $SLOTSYNC_PG_MAJORS
# (default 15,16,17,18), fetching missing binaries first. Extra arguments go to `go test`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export SLOTSYNC_PG_MAJORS=${SLOTSYNC_PG_MAJORS:-15,16,17,18}
# How many go tests run the engine's real-pair tests side by side (below).
runs=${SLOTSYNC_TEST_RUNS:-1}
[[ $runs =~ ^[1-9]$ ]] || { echo "SLOTSYNC_TEST_RUNS=$runs: give a number from 1 to 9" >&2; exit 2; }

# With 16, also 16.2: the sql method's refusal of 16.0-16.3 is tested on it.
extra=""
case ",${SLOTSYNC_PG_MAJORS}," in *,16,*) extra=16.2 ;; esac
"$repo/scripts/fetch-postgres.sh" $(echo "${SLOTSYNC_PG_MAJORS}" | tr ',' ' ') $extra

# The Docker backend's tests use the local image scripts/setup.sh builds, when it is there (else
# the official postgres image), and no reaper container (the tests remove their own).
if [ -z "${SLOTSYNC_DOCKER_IMAGE:-}" ] && command -v docker >/dev/null && docker image inspect slotsync-postgres:17 >/dev/null 2>&1; then
  export SLOTSYNC_DOCKER_IMAGE=slotsync-postgres:17 SLOTSYNC_DOCKER_MAJOR=17
fi
export TESTCONTAINERS_RYUK_DISABLED=${TESTCONTAINERS_RYUK_DISABLED:-true}

# This run's test clusters live under a directory of its own (traversable by the unprivileged
# user they run as), so the safety net below stops only what this run left behind, never the
# servers of another run on the same machine.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/slotsync-run.XXXXXX")
chmod 755 "$run_tmp"
export TMPDIR=$run_tmp

# Safety net: stop any test server a killed test binary left behind.
reap() {
  for pidfile in "$run_tmp"/slotsync-pg*/*/postmaster.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(head -1 "$pidfile")
    # The postmaster leads its process group, except on 11 (pg_ctl does not setsid there).
    [ -n "$pid" ] && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; }
  done
  rm -rf "$run_tmp"
}
trap reap EXIT

# SLOTSYNC_BACKEND=docker runs every pair as containers: the Docker backend is linked into the
# tests with the build tag docker (unit tests leave it out).
tags=()
[ "${SLOTSYNC_BACKEND:-}" = docker ] && tags=(-tags docker)
# The engine's real-pair tests (./sync) are the longest package by far, and mostly wait on their
# servers (alone, they keep a third of two cores busy): they run as $SLOTSYNC_TEST_RUNS go tests
# side by side (default 1), the majors dealt out in turn (with 2: 15 and 17 in one, 16 and 18 in
# the other, about as many tests each), beside a go test of every other package on every major,
# the explorer first. Each run's output follows the one before it.
IFS=', ' read -r -a majors <<<"$SLOTSYNC_PG_MAJORS"
[ "$runs" -le ${#majors[@]} ] || runs=$(( ${#majors[@]} > 0 ? ${#majors[@]} : 1 ))
shares=()
for i in "${!majors[@]}"; do
  shares[$((i % runs))]+="${shares[$((i % runs))]:+,}${majors[$i]}"
done
module=$(go list -m)
rest=$(go list ./... | grep -vx -e "$module/sync" -e "$module/integration/explore")
logs=() pids=()
for share in "${shares[@]}"; do
  logs+=("$(mktemp)")
  # The bound: the engine's tests on four majors take about 32 minutes in one run on two cores.
  SLOTSYNC_PG_MAJORS=$share go test -count=1 -timeout 45m "${tags[@]}" "$@" ./sync >"${logs[-1]}" 2>&1 &
  pids+=($!)
done
rc=0
# The fault explorer first (go test starts test binaries in the order given), so it runs beside
# the others from the start instead of last: one package at a time beside one run of ./sync (two
# test binaries at once, as the explorer's mutant sample was measured), two beside more.
packages_at_once=2
[ "$runs" -gt 1 ] || packages_at_once=1
go test -count=1 -timeout 45m -p "$packages_at_once" "${tags[@]}" "$@" ./integration/explore $rest || rc=1
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || rc=1
  cat "${logs[$i]}"
  rm -f "${logs[$i]}"
done
exit "$rc"
