#!/bin/sh
# Patroni's bootstrap.post_bootstrap: creates the role slotsync logs in as (docs/PRIVILEGES.md),
# once, on the first primary; roles replicate to every replica. Patroni passes the superuser's
# connection URL as $1 and sets PGPASSFILE. The password is the one the sidecar reads
# (SLOTSYNC_PRIMARY_PASSWORD_FILE in /etc/slotsync/slotsync.env, in Patroni's environment).
#
# patroni.yml:   bootstrap: { post_bootstrap: /usr/local/bin/slotsync-post-bootstrap }
set -eu
pwfile=${SLOTSYNC_PRIMARY_PASSWORD_FILE:-/etc/slotsync/password}
[ -r "$pwfile" ] || { echo "slotsync post_bootstrap: cannot read the password file $pwfile" >&2; exit 1; }
password=$(cat "$pwfile")
# With SLOTSYNC_MANAGE_SYNCHRONIZED_STANDBY_SLOTS on (17+, in slotsync.env), the role also sets
# synchronized_standby_slots (docs/PRIVILEGES.md).
case "${SLOTSYNC_MANAGE_SYNCHRONIZED_STANDBY_SLOTS:-}" in
  true|TRUE|True|t|T|1) manage=on ;;
  *) manage=off ;;
esac
psql -X -q -v ON_ERROR_STOP=1 -v pw="$password" -v manage="$manage" -d "$1" <<'SQL'
CREATE ROLE slotsync LOGIN REPLICATION PASSWORD :'pw';
GRANT pg_monitor TO slotsync;
GRANT EXECUTE ON FUNCTION pg_catalog.pg_read_binary_file(text) TO slotsync;
GRANT EXECUTE ON FUNCTION pg_catalog.pg_stat_file(text, boolean) TO slotsync;
SELECT 'GRANT pg_checkpoint TO slotsync' WHERE current_setting('server_version_num')::int >= 150000 \gexec
SELECT 'GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_standby_snapshot() TO slotsync' WHERE current_setting('server_version_num')::int >= 160000 \gexec
SELECT 'GRANT ALTER SYSTEM ON PARAMETER synchronized_standby_slots TO slotsync' WHERE :'manage' = 'on' AND current_setting('server_version_num')::int >= 170000 \gexec
SELECT 'GRANT EXECUTE ON FUNCTION pg_catalog.pg_reload_conf() TO slotsync' WHERE :'manage' = 'on' AND current_setting('server_version_num')::int >= 170000 \gexec
SQL
