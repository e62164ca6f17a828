#!/bin/bash
# The official postgres image's entrypoint contract, for an image built from Debian's packages:
# on the first start (empty $PGDATA) initdb, allow connections as POSTGRES_HOST_AUTH_METHOD says,
# run /docker-entrypoint-initdb.d/*.sh against a temporary server, then exec the command
# ("postgres -c …") as the postgres user.
set -euo pipefail
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec runuser -u postgres -- "$0" "$@"
fi
if [ "${1:0:1}" = - ]; then
  set -- postgres "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --auth-local=trust --auth-host="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >/dev/null
  echo "host all all all ${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
  for f in /docker-entrypoint-initdb.d/*.sh; do
    [ -e "$f" ] && . "$f"
  done
  pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec "$@"
