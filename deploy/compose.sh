#!/usr/bin/env bash
# Runs docker-compose.yml on the container engine this machine has: Docker (`docker
# compose`, when a Docker engine answers) or podman (`podman-compose`). `make up` and
# `make down` call it; so does the stack test (tests/deploy/stack).
#
#   deploy/compose.sh engine           print `docker` or `podman`
#   deploy/compose.sh image            print the image the Dockerfile is built as
#   deploy/compose.sh build            build the codec-ab image (health check kept)
#   deploy/compose.sh up [-d]          build, then start in order (attached without -d)
#   deploy/compose.sh up --no-build -d start in order, building nothing
#   deploy/compose.sh down             stop (30 s grace), remove containers, networks,
#                                      volumes
#   deploy/compose.sh cli ARGS...      the engine's own command (docker/podman ARGS)
#   deploy/compose.sh ARGS...          any other compose command (ps, logs, stop, ...)
#
# COMPOSE_ENGINE=docker|podman picks one; COMPOSE_PROJECT_NAME names the stack
# (default codec-ab); SERVICES (space-separated) limits `up` to some services.
#
# Start order on podman-compose: 1.0.3 (Debian bookworm) ignores `depends_on`
# conditions, so `up` starts the stack in the compose file's order itself: kafka; the
# one-shot `topics` job, waited for and required to exit 0; the workers and Prometheus;
# Grafana; then the load generators. It also builds in Docker's image format
# (`podman build --format docker`: the OCI format has no HEALTHCHECK), stops containers with
# the compose file's 30 s grace (its `down` gives 1 s) and removes the networks and
# anonymous volumes its `down` leaves behind. On a machine where podman's
# defaults fail (crun on mixed cgroups, a nofile hard limit below podman's default),
# it writes a containers.conf with runc, the shell's hard limits and netavark, unless
# CONTAINERS_CONF is set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
compose_file="$root/docker-compose.yml"
project="${COMPOSE_PROJECT_NAME:-codec-ab}"
grace=30  # stop_grace_period of the workers in docker-compose.yml
order=(kafka topics "worker-a worker-b prometheus" grafana "loadgen-a loadgen-b")

steps="$(mktemp)"
trap 'rm -f "$steps"' EXIT
die() {
  [ ! -s "$steps" ] || tail -n 20 "$steps" >&2
  printf 'compose.sh: %s\n' "$*" >&2
  exit 2
}

engine() {
  case "${COMPOSE_ENGINE:-}" in
    docker | podman) echo "$COMPOSE_ENGINE"; return ;;
    "") ;;
    *) die "COMPOSE_ENGINE=$COMPOSE_ENGINE: expected docker or podman" ;;
  esac
  if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1 \
      && docker info >/dev/null 2>&1; then
    echo docker
  elif command -v podman-compose >/dev/null 2>&1 && command -v podman >/dev/null 2>&1; then
    echo podman
  else
    die "neither \`docker compose\` with a running engine nor podman-compose is installed" \
      "(scripts/install-system-deps.sh --stack installs podman)"
  fi
}

# podman_conf: a containers.conf for this machine when podman's defaults would fail.
podman_conf() {
  [ -z "${CONTAINERS_CONF:-}" ] || return 0
  local lines=() nofile nproc
  if [ -d /sys/fs/cgroup/unified ] && command -v runc >/dev/null 2>&1; then
    lines+=("[engine]" 'runtime = "runc"')  # crun refuses hybrid cgroup hierarchies
  fi
  nofile="$(ulimit -Hn)"
  nproc="$(ulimit -Hu)"
  if [ "$nofile" != unlimited ] && [ "$nofile" -lt 1048576 ]; then
    # An nproc above the kernel's pid_max is refused too (seen: 32768 here).
    pid_max="$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)"
    if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pid_max" ]; then nproc="$pid_max"; fi
    lines+=("[containers]" "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]")
  fi
  if [ -x /usr/lib/podman/netavark ] || [ -x /usr/libexec/podman/netavark ]; then
    lines+=("[network]" 'network_backend = "netavark"')  # name resolution: aardvark-dns
  fi
  [ "${#lines[@]}" -gt 0 ] || return 0
  local conf="${TMPDIR:-/tmp}/codec-ab-containers-$(id -u).conf"
  printf '%s\n' "${lines[@]}" >"$conf"
  export CONTAINERS_CONF="$conf"
}

compose() {
  if [ "$ENGINE" = docker ]; then
    docker compose -p "$project" -f "$compose_file" "$@"
  else
    podman-compose -p "$project" -f "$compose_file" "$@"
  fi
}

# ids [SERVICE]: the stack's containers (all, or one service's), running or not.
ids() {
  local filters=(--filter "label=com.docker.compose.project=$project")
  [ $# -eq 0 ] || filters+=(--filter "label=com.docker.compose.service=$1")
  "$ENGINE" ps -aq "${filters[@]}"
}

# The image built from the Dockerfile: the compose file's `image:` of the codec-ab services.
app_image() {
  sed -nE 's/^ +image: (codec-ab:[^ ]+)$/\1/p' "$compose_file" | head -n1
}

build() {
  if [ "$ENGINE" = docker ]; then
    compose build worker-a
  else
    # podman-compose 1.0.3's build exits 0 when the build fails: build directly. The
    # RUN steps use the host's network, which reaches the package registries where a
    # container network may not (a sandbox that answers DNS on the host only).
    podman build --network host --format docker -t "$(app_image)" \
      -f "$root/Dockerfile" "$root"
  fi
}

# running SERVICE...: fail unless each service's container is running.
running() {
  local service id state
  for service in "$@"; do
    id="$(ids "$service")"
    state="$([ -z "$id" ] || podman inspect --format '{{.State.Status}}' "$id")"
    [ "$state" = running ] || die "$service: ${state:-not created} (podman-compose -p $project logs $service)"
  done
}

up_podman() {
  local detach=0 arg services service step wanted topics status id
  for arg in "$@"; do [ "$arg" = -d ] && detach=1; done
  wanted=" ${SERVICES:-${order[*]}} "
  # Create every wanted container (and the network) without starting any: podman-compose
  # would start each service's dependencies again with it. podman-compose reports no
  # failure in its exit status, so each step is checked below, and its output (with
  # podman's notes that no systemd runs the health checks here: the stack test runs
  # them itself) is shown only then.
  # shellcheck disable=SC2086 # a list of service names
  compose up --no-start --no-build $wanted >"$steps" 2>&1
  for step in "${order[@]}"; do
    services=()
    for arg in $step; do [[ "$wanted" == *" $arg "* ]] && services+=("$arg"); done
    for service in "${services[@]}"; do
      id="$(ids "$service")"
      [ -n "$id" ] || die "$service: not created (podman-compose -p $project up $service)"
      podman start "$id" >>"$steps" 2>&1 || die "$service: did not start"
    done
    [ "${#services[@]}" -gt 0 ] || continue
    if [ "$step" = topics ]; then
      topics="$(ids topics)"
      status="$(timeout 300 podman wait "$topics")" || die "topics: still running after 300 s"
      [ "$status" = 0 ] || die "topics exited $status (podman-compose -p $project logs topics)"
    else
      running "${services[@]}"
    fi
  done
  echo "stack $project is up ($ENGINE); stop it with: make down"
  if [ "$detach" = 0 ]; then
    # The started containers' logs (podman-compose's `logs` asks for every service's).
    # shellcheck disable=SC2046 # container ids
    podman logs -f --names $(ids)
  fi
}

down() {
  local containers networks volumes
  containers="$(ids)"
  if [ -n "$containers" ]; then
    # Anonymous volumes (Prometheus's /prometheus) are dropped with their containers.
    volumes="$("$ENGINE" inspect --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' $containers)"
    # shellcheck disable=SC2086 # ids are words
    "$ENGINE" stop -t "$grace" $containers >"$steps" 2>&1 || die "stop failed"
  fi
  local out
  out="$(compose down -v 2>&1)" || { printf '%s\n' "$out" >&2; return 1; }
  containers="$(ids)"
  # shellcheck disable=SC2086
  [ -z "$containers" ] || "$ENGINE" rm -f -v $containers >"$steps" 2>&1 || die "rm failed"
  networks="$("$ENGINE" network ls -q --filter "label=com.docker.compose.project=$project")"
  # shellcheck disable=SC2086
  [ -z "$networks" ] || "$ENGINE" network rm $networks >/dev/null
  for volume in ${volumes:-}; do
    "$ENGINE" volume rm -f "$volume" >/dev/null 2>&1 || true
  done
}

ENGINE="$(engine)"
[ "$ENGINE" = docker ] || podman_conf
[ $# -gt 0 ] || die "usage: deploy/compose.sh engine|build|up [-d] [--no-build]|down|COMPOSE-ARGS..."
command="$1"
shift
case "$command" in
  engine) echo "$ENGINE" ;;
  image) app_image ;;
  cli) "$ENGINE" "$@" ;;
  build) build ;;
  up)
    args=()
    for arg in "$@"; do [ "$arg" = --no-build ] || args+=("$arg"); done
    [ "${#args[@]}" -lt "$#" ] || build
    if [ "$ENGINE" = docker ]; then
      # shellcheck disable=SC2086 # SERVICES is a list of words
      compose up --no-build "${args[@]}" ${SERVICES:-}
    else
      up_podman "${args[@]}"
    fi
    ;;
  down) down ;;
  *) compose "$command" "$@" ;;
esac
