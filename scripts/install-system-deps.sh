#!/usr/bin/env bash
# Installs the system tools the deploy checks need, only where they are missing:
#   prometheus, promtool  Debian's `prometheus` (tests/integration/test_prometheus.py)
#   docker-compose        Debian's `docker-compose` (`docker-compose config -q` in
#                         tests/deploy/; no Docker engine is needed)
#   valgrind              Debian's `valgrind` (`make bench-instructions` counts the hot
#                         loop's instructions with callgrind)
#   kustomize             only when neither `kustomize` nor `kubectl kustomize` works:
#                         built from its Go module when Go is present (else the k8s
#                         build checks in tests/deploy/ are skipped)
# Idempotent and quiet: prints nothing and exits 0 when everything is present; shows
# the tools' output only when they fail. Runs as root, or through sudo. Targets Debian
# bookworm (apt-get).
set -euo pipefail

KUSTOMIZE_MODULE="sigs.k8s.io/kustomize/kustomize/v5@v5.5.0"

log() { printf 'install-system-deps: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    log "need root (or sudo) to run: $*"
    return 1
  fi
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# quietly CMD...: runs CMD with its output kept aside; shows it if CMD fails.
quietly() {
  if ! "$@" >"$work/out" 2>&1; then
    cat "$work/out" >&2
    log "failed: $*"
    exit 1
  fi
}

missing=()
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  missing+=(prometheus)
fi
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)

if [ "${#missing[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    log "apt-get not found: install ${missing[*]} by hand"
    exit 1
  fi
  log "installing ${missing[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  quietly as_root apt-get update -qq
  # Installed for their binaries: on a machine with an init system, Debian's
  # postinst may also start a prometheus service on :9090 (the tests use other ports).
  quietly as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

kustomize_works() {
  if command -v kustomize >/dev/null 2>&1 && kustomize version >/dev/null 2>&1; then
    return 0
  fi
  command -v kubectl >/dev/null 2>&1 && kubectl kustomize --help >/dev/null 2>&1
}

if ! kustomize_works; then
  if command -v go >/dev/null 2>&1; then
    log "building kustomize from ${KUSTOMIZE_MODULE} (Go)"
    quietly env GOBIN="$work/bin" GOFLAGS=-mod=mod go install "${KUSTOMIZE_MODULE}"
    quietly as_root install -m 0755 "$work/bin/kustomize" /usr/local/bin/kustomize
  else
    log "no kustomize, kubectl or Go: the kustomize build checks will be skipped"
  fi
fi

exit 0
