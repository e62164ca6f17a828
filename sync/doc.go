// Package sync copies logical replication slots from a primary to its standby in passes of
// observe (snapshot both nodes), plan (a pure function to actions) and apply.
package sync
