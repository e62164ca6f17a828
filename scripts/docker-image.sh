#!/usr/bin/env bash
# Builds a local PostgreSQL image, slotsync-postgres:15, from Debian's packages (debootstrap and
# postgresql-15, then docker import), for the Docker backend's tests on a machine that reaches
# Debian's archive but no container registry. It follows the official postgres image's contract
# (integration/docker/image/docker-entrypoint.sh). Usage: scripts/docker-image.sh [IMAGE]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
image=${1:-slotsync-postgres:15}
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "docker image $image: present"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "docker image $image: debootstrap bookworm with postgresql-15 (a few minutes)"
debootstrap --variant=minbase --include=postgresql-15,postgresql-client-15 bookworm "$work/rootfs" \
  "${SLOTSYNC_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
# The package's default cluster is not wanted: the entrypoint makes one in $PGDATA.
rm -rf "$work/rootfs/var/lib/postgresql/15/main" "$work/rootfs/etc/postgresql/15/main" "$work/rootfs/var/cache/apt/archives/"*.deb
install -m 0755 "$repo/integration/docker/image/docker-entrypoint.sh" "$work/rootfs/usr/local/bin/docker-entrypoint.sh"
tar -C "$work/rootfs" -c . | docker import \
  -c 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV PGDATA=/var/lib/postgresql/data' \
  -c 'ENTRYPOINT ["docker-entrypoint.sh"]' -c 'CMD ["postgres"]' -c 'EXPOSE 5432' \
  - "$image" >/dev/null
echo "docker image $image: built"
