#!/bin/sh
# Build the splitbrain/base image without any registry: debootstrap a minimal Debian into a
# temporary directory from MIRROR and import it with `docker import`.
#   usage: bootstrap-base.sh MIRROR SUITE TAG [SOURCES_LIST_FILE [INCLUDE]]
# INCLUDE is a comma-separated package list installed by debootstrap itself (on the host's file
# system, much faster than dpkg inside a docker build on an overlay file system).
# harness/images.py calls this with the mirror read from the machine's apt sources.
set -eu
[ "$#" -ge 3 ] || { echo "usage: $0 MIRROR SUITE TAG [SOURCES_LIST_FILE [INCLUDE]]" >&2; exit 2; }
mirror=$1 suite=$2 tag=$3 sources=${4:-} include=${5:-}
command -v debootstrap >/dev/null || { echo "bootstrap-base: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }
root=$(mktemp -d /var/tmp/splitbrain-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT INT TERM
debootstrap --variant=minbase ${include:+--include="$include"} "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
  echo "bootstrap-base: debootstrap failed; last lines of $root.log:" >&2; tail -n 20 "$root.log" >&2; exit 1; }
rm -f "$root.log"
[ -z "$sources" ] || cp "$sources" "$root/etc/apt/sources.list"
rm -f "$root"/etc/ssh/ssh_host_*
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/* 2>/dev/null || true
tar -C "$root" --numeric-owner -c . | docker import -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' - "$tag" >/dev/null
echo "bootstrap-base: imported $tag from $mirror ($suite)"
