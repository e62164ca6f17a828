#!/bin/sh
# Runs once on the primary's first start: replication access, the standby's physical slot, and
# a least-privilege role for slotsync (PostgreSQL 16+, sql method; see docs/PRIVILEGES.md).
set -e
echo "host replication all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
psql -v ON_ERROR_STOP=1 -U postgres <<'SQL'
SELECT pg_create_physical_replication_slot('standby1', true);
CREATE ROLE slotsync LOGIN REPLICATION PASSWORD 'slotsync-example';
GRANT pg_monitor TO slotsync;
GRANT EXECUTE ON FUNCTION pg_log_standby_snapshot() TO slotsync;
SQL
