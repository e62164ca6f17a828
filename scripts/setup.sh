#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build slotsync and run its real
# PostgreSQL pairs: PostgreSQL 15 from the distribution, Node's npm (to fetch the other majors),
# Patroni and etcd (the HA-manager tests), a Docker engine with a local PostgreSQL 17 image built
# by debootstrap from Debian's packages (the Docker backend's tests and the drill on Docker),
# an unprivileged user for the test clusters when run as root, and the binary cache for the
# majors in $SLOTSYNC_PG_MAJORS (default 15,16,17,18). Idempotent; Go 1.26+ must be installed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
majors=${SLOTSYNC_PG_MAJORS:-15,16,17,18}

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

command -v go >/dev/null || { echo "Go 1.26 or newer is needed: https://go.dev/doc/install" >&2; exit 1; }

need=()
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
command -v npm >/dev/null || need+=(npm)
# A real Patroni cluster (etcd, two PostgreSQL 15 nodes) for the HA-manager tests.
command -v patroni >/dev/null || need+=(patroni)
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
# A Docker engine and debootstrap, for the Docker backend's tests on a local image.
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
# PostgreSQL 19 comes from Debian's newer packages, made to run here with patchelf.
command -v patchelf >/dev/null || need+=(patchelf)
command -v xz >/dev/null || need+=(xz-utils)
# systemd-analyze verifies the example unit (the package is not started here).
command -v systemd-analyze >/dev/null || need+=(systemd)
# zsh checks the syntax of the generated zsh completion.
command -v zsh >/dev/null || need+=(zsh)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ "$(id -u)" -eq 0 ]; then
  run_user=${SLOTSYNC_PG_USER:-postgres}
  id "$run_user" >/dev/null 2>&1 || useradd --system --create-home "$run_user"
fi

# With 16, also 16.2: the sql method's refusal of 16.0-16.3 is tested on it.
extra=""
case ",${majors}," in *,16,*) extra=16.2 ;; esac
"$repo/scripts/fetch-postgres.sh" $(echo "${majors}" | tr ',' ' ') $extra

# Start the Docker engine when it is installed and not running (as root; a machine with its own
# engine keeps it), then build the local PostgreSQL image the Docker backend's tests use.
if command -v docker >/dev/null && ! docker info >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v dockerd >/dev/null; then
  echo "starting dockerd (log: /var/log/slotsync-dockerd.log)"
  (dockerd >/var/log/slotsync-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
fi
if docker info >/dev/null 2>&1 && command -v debootstrap >/dev/null && [ "$(id -u)" -eq 0 ]; then
  "$repo/scripts/docker-image.sh" 17
else
  echo "no Docker engine here: the Docker backend's tests will skip"
fi
