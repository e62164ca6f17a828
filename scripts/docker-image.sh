#!/usr/bin/env bash
# Builds a local PostgreSQL image, slotsync-postgres:MAJOR, from Debian's packages (debootstrap of
# the release that ships postgresql-MAJOR, then docker import), for the Docker backend's tests on a
# machine that reaches Debian's archive but no container registry: 15 from bookworm, 17 from
# trixie. It follows the official postgres image's contract
# (integration/docker/image/docker-entrypoint.sh). The 17 image also carries trixie's Patroni
# (4.0), which the Patroni example's test runs on 17. Usage: scripts/docker-image.sh [MAJOR]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
major=${1:-17}
extra=""
case "$major" in
  15) suite=bookworm ;;
  17) suite=trixie extra=,patroni ;;
  *) echo "docker-image.sh: Debian ships PostgreSQL 15 (bookworm) and 17 (trixie); for $major use the official image (postgres:$major)" >&2; exit 2 ;;
esac
image=slotsync-postgres:$major
# The label names what the image holds: an image built before it carried Patroni is built again.
contents="postgresql-$major$extra"
if [ "$(docker image inspect -f '{{index .Config.Labels "slotsync.contents"}}' "$image" 2>/dev/null)" = "$contents" ]; then
  echo "docker image $image: present"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "docker image $image: debootstrap $suite with $contents (a few minutes)"
debootstrap --variant=minbase --include="postgresql-$major,postgresql-client-$major$extra" "$suite" "$work/rootfs" \
  "${SLOTSYNC_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
# The package's default cluster is not wanted: the entrypoint makes one in $PGDATA.
rm -rf "$work/rootfs/var/lib/postgresql/$major/main" "$work/rootfs/etc/postgresql/$major/main" "$work/rootfs/var/cache/apt/archives/"*.deb
install -m 0755 "$repo/integration/docker/image/docker-entrypoint.sh" "$work/rootfs/usr/local/bin/docker-entrypoint.sh"
tar -C "$work/rootfs" -c . | docker import \
  -c "ENV PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  -c 'ENV PGDATA=/var/lib/postgresql/data' \
  -c "LABEL slotsync.contents=$contents" -c 'ENTRYPOINT ["docker-entrypoint.sh"]' -c 'CMD ["postgres"]' -c 'EXPOSE 5432' \
  - "$image" >/dev/null
echo "docker image $image: built"
