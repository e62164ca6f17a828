// Package integration starts real PostgreSQL primary/streaming-standby pairs, from local binaries
// or Docker containers, for slotsync's tests, failover drills and users' own CI.
package integration
