// Package bench holds slotsync's benchmarks on real pairs (sync lag, pass and check time,
// time to READY, the sidecar's memory and CPU), beside PostgreSQL 17's own slot sync; run them
// with go test -bench . ./integration/bench/ (docs/BENCHMARKS.md).
package bench
