// Package statefile is the state-file method (PostgreSQL 11 to 15, by choice on 16+): it reads,
// validates, writes and installs PostgreSQL's on-disk replication slot state
// (pg_replslot/<slot>/state) with the decoding snapshot and the WAL a copy needs, holds the
// copy's catalog rows on the primary until the standby's feedback does, and restarts the standby
// to load the copies in one of three ways (restartStrategy).
package statefile
