#!/usr/bin/env bash
# Builds the stand-ins' Debian bookworm base image from Debian's packages, for a machine
# that reaches Debian's archive but no container registry:
#   debootstrap --variant=minbase bookworm into a temporary folder, then `ENGINE import`.
#
#   tests/deploy/standins/debian-base.sh ENGINE IMAGE     e.g. podman localhost/x:bookworm
#
# The archive is the one this machine's apt uses (its sources' first URI), so no host is
# written here; DEBIAN_MIRROR overrides it. Needs root and debootstrap
# (scripts/install-system-deps.sh --stack installs it). About 2-4 minutes, ~120 MB.
set -euo pipefail

engine="${1:?usage: debian-base.sh ENGINE IMAGE}"
image="${2:?usage: debian-base.sh ENGINE IMAGE}"

mirror="${DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  # deb822 `URIs:` lines, then one-line `deb [options] URI suite` entries.
  mirror="$(
    cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
      | grep -E '^(URIs:|deb )' | grep -oE '(https?|file)://[^ ]+' \
      | grep -v -- '-security' | head -n1 || true
  )"
fi
if [ -z "$mirror" ]; then
  echo "debian-base: no Debian archive in this machine's apt sources; set DEBIAN_MIRROR" >&2
  exit 2
fi

root="$(mktemp -d "${TMPDIR:-/tmp}/codec-ab-debian.XXXXXX")"
trap 'rm -rf "$root"' EXIT
log="$root.log"
if ! debootstrap --variant=minbase --include=ca-certificates bookworm "$root/fs" "$mirror" \
    >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "debian-base: debootstrap failed (log: $log)" >&2
  exit 1
fi
rm -f "$log"
# What the official images leave out: the apt caches and lists, the man pages.
rm -rf "$root/fs/var/cache/apt/archives/"*.deb "$root/fs/var/lib/apt/lists/"*
tar -C "$root/fs" --numeric-owner -c . \
  | "$engine" import \
      --change 'CMD ["bash"]' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'LABEL org.codec-ab.stand-in="Debian bookworm (debootstrap --variant=minbase)"' \
      - "$image" >/dev/null
