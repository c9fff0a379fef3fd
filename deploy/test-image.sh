#!/usr/bin/env bash
# Builds the KLS image from the Dockerfile and runs it.
#
#   bash deploy/test-image.sh          (or: cd build && ctest -L image)
#
# 1. Base images. The Dockerfile starts FROM debian:12 and debian:12-slim. When
#    the engine lacks them (a machine without access to an image registry),
#    they are made here: debootstrap --variant=minbase of Debian 12 from the
#    Debian mirror this machine's apt uses, imported as both tags (the slim one
#    without docs, man pages and locales). The root file systems are cached as
#    tarballs in $KLS_IMAGE_CACHE (default /var/tmp/kls-image), so only the
#    first run pays for debootstrap; delete the directory to start over.
# 2. Build: podman build --isolation chroot --format docker (docker format keeps
#    HEALTHCHECK), under nice -n 19; or docker build with KLS_IMAGE_ENGINE=docker.
# 3. Run, with the image's own user, working directory, environment, CMD and
#    HEALTHCHECK. With `docker run` / `podman run` where they work. Where they
#    do not (a container without the rights crun needs: "setrlimit
#    RLIMIT_NOFILE: Operation not permitted"), the image's file system is
#    mounted (podman image mount) and the commands run in it with chroot as the
#    image's user, in a network namespace of their own (so the CMD's port
#    50051 cannot collide with anything on the host).
#    Checks: the HEALTHCHECK command passes; the server process runs as the
#    image's non-root user; upload iris.csv, learn a kl_admm kernel, query it;
#    SIGTERM -> exit code 0; start again on the same data directory -> the same
#    answers; every binary in /usr/local/bin finds all its shared libraries
#    (ldd, no "not found"). Reports build time and image size.
#
# Exit 0 passed, 1 failed, 77 skipped (no podman, not root for the
# chroot run, no debootstrap to make missing base images).
#
# Environment: KLS_IMAGE_CACHE (base tarballs), KLS_IMAGE_TAG (default kls:test),
# KLS_IMAGE_ENGINE (podman|docker; default podman: without podman the test
# skips unless KLS_IMAGE_ENGINE=docker), KLS_IMAGE_RUN (auto|container|chroot),
# KLS_IMAGE_REUSE=1 (do not rebuild when the tag exists), KLS_DEBIAN_MIRROR and
# KLS_DEBIAN_SECURITY_MIRROR (default: the ones in /etc/apt).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KLS_IMAGE_CACHE:-/var/tmp/kls-image}
IMAGE=${KLS_IMAGE_TAG:-kls:test}
RUN_MODE=${KLS_IMAGE_RUN:-auto}
SECONDS=0

log()  { printf 'test-image [%4ds]: %s\n' "$SECONDS" "$*"; }
skip() { echo "test-image: SKIPPED: $*" >&2; exit 77; }
fail() { echo "test-image: FAILED: $*" >&2; exit 1; }

# ---- engine --------------------------------------------------------------------
ENGINE=${KLS_IMAGE_ENGINE:-}
if [[ -z $ENGINE ]]; then
  # Podman only unless asked: a machine without it (CI) skips this long test
  # even when a Docker daemon happens to answer.
  command -v podman >/dev/null 2>&1 ||
    skip "podman is not installed (apt-get install podman debootstrap; or KLS_IMAGE_ENGINE=docker to use Docker)"
  ENGINE=podman
fi
command -v "$ENGINE" >/dev/null 2>&1 || skip "$ENGINE is not installed"
if [[ $ENGINE == docker ]]; then
  docker info >/dev/null 2>&1 || skip "the Docker daemon does not answer (docker info)"
fi
if [[ $ENGINE == podman && $(id -u) -ne 0 ]]; then
  # Rootless podman could build, but the chroot fallback (image mount, chroot,
  # network namespace) needs root; keep one well-tested path.
  skip "podman mode needs root (image mount + chroot); run as root"
fi
log "engine: $ENGINE $($ENGINE --version | head -1)"

image_exists() { "$ENGINE" image inspect "$1" >/dev/null 2>&1; }

# ---- 1. base images --------------------------------------------------------------
# The Debian mirror apt on this machine uses (deb822 .sources or one-line lists).
apt_uris() {
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{for (i = 2; i <= NF; i++) print $i}'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
      sed -E 's/\[[^]]*\]//' | awk '{print $2}'
  } 2>/dev/null || true
}
MIRROR=${KLS_DEBIAN_MIRROR:-$(apt_uris | grep -E '/debian/?$' | head -1 || true)}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${KLS_DEBIAN_SECURITY_MIRROR-$(apt_uris | grep -E '/debian-security/?$' | head -1 || true)}

make_base_tarballs() {
  command -v debootstrap >/dev/null 2>&1 ||
    skip "base images debian:12/debian:12-slim missing and no debootstrap to make them (apt-get install debootstrap)"
  [[ $(id -u) -eq 0 ]] || skip "debootstrap needs root"
  local rootfs=$CACHE/rootfs
  rm -rf "$rootfs" "$rootfs-slim"
  log "debootstrap --variant=minbase bookworm from $MIRROR (once; cached in $CACHE)"
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$CACHE/debootstrap.log" >&2; fail "debootstrap"; }
  {
    echo "deb $MIRROR bookworm main"
    echo "deb $MIRROR bookworm-updates main"
    [[ -n $SECURITY ]] && echo "deb $SECURITY bookworm-security main"
  } >"$rootfs/etc/apt/sources.list"
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log
  : >"$rootfs/etc/resolv.conf"
  tar --numeric-owner -C "$rootfs" -cf "$CACHE/debian12.tar.part" . && mv "$CACHE/debian12.tar.part" "$CACHE/debian12.tar"

  # Slim: no docs (copyright files kept), man pages, info or locales, and dpkg
  # told not to install them later either.
  cp -a "$rootfs" "$rootfs-slim"
  cat >"$rootfs-slim/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$rootfs-slim/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$rootfs-slim"/usr/share/man/* "$rootfs-slim"/usr/share/info/*
  find "$rootfs-slim/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  tar --numeric-owner -C "$rootfs-slim" -cf "$CACHE/debian12-slim.tar.part" . &&
    mv "$CACHE/debian12-slim.tar.part" "$CACHE/debian12-slim.tar"
  rm -rf "$rootfs" "$rootfs-slim"
}

# podman resolves FROM debian:12 to docker.io/library/debian:12.
base_name() { [[ $ENGINE == podman ]] && echo "docker.io/library/$1" || echo "$1"; }
if ! image_exists "$(base_name debian:12)" || ! image_exists "$(base_name debian:12-slim)"; then
  mkdir -p "$CACHE"
  if [[ ! -f $CACHE/debian12.tar || ! -f $CACHE/debian12-slim.tar ]]; then
    make_base_tarballs
  else
    log "base tarballs from the cache $CACHE"
  fi
  for tag in debian:12 debian:12-slim; do
    tar=$CACHE/debian12${tag#debian:12}.tar
    out=$("$ENGINE" import "$tar" "$(base_name "$tag")" 2>&1) || { echo "$out" >&2; fail "$ENGINE import $tar"; }
  done
  log "imported debian:12 and debian:12-slim"
else
  log "base images debian:12 and debian:12-slim present"
fi

# ---- 2. build ------------------------------------------------------------------
BUILD_SECONDS=reused
if [[ ${KLS_IMAGE_REUSE:-0} == 1 ]] && image_exists "$IMAGE"; then
  log "KLS_IMAGE_REUSE=1: using the existing $IMAGE"
else
  log "building $IMAGE (nice -n 19; the compile step takes a while)"
  t0=$SECONDS
  if [[ $ENGINE == podman ]]; then
    nice -n 19 podman build --isolation chroot --format docker --pull=never \
      -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT" || fail "podman build"
  else
    nice -n 19 docker build -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT" || fail "docker build"
  fi
  BUILD_SECONDS=$((SECONDS - t0))
  log "built $IMAGE in ${BUILD_SECONDS} s"
fi

# ---- the image's configuration ---------------------------------------------------------
inspect() { "$ENGINE" image inspect --format "$1" "$IMAGE"; }
IMG_USER=$(inspect '{{.Config.User}}')
IMG_WORKDIR=$(inspect '{{.Config.WorkingDir}}')
mapfile -t IMG_ENV < <(inspect '{{range .Config.Env}}{{println .}}{{end}}' | sed '/^$/d')
mapfile -t IMG_CMD < <(inspect '{{range .Config.Cmd}}{{println .}}{{end}}' | sed '/^$/d')
if [[ $ENGINE == podman ]]; then
  mapfile -t HC < <(inspect '{{if .HealthCheck}}{{range .HealthCheck.Test}}{{println .}}{{end}}{{end}}' | sed '/^$/d')
else
  mapfile -t HC < <(inspect '{{if .Config.Healthcheck}}{{range .Config.Healthcheck.Test}}{{println .}}{{end}}{{end}}' | sed '/^$/d')
fi
SIZE=$(inspect '{{.Size}}')
[[ -n $IMG_USER && $IMG_USER != root && $IMG_USER != 0 ]] || fail "image USER is '$IMG_USER', want a non-root user"
((${#IMG_CMD[@]} > 0)) || fail "image has no CMD"
((${#HC[@]} > 1)) || fail "image has no HEALTHCHECK (podman must build with --format docker)"
case ${HC[0]} in
  CMD) HC_CMD=("${HC[@]:1}") ;;
  CMD-SHELL) HC_CMD=(/bin/sh -c "${HC[1]}") ;;
  *) fail "unexpected HEALTHCHECK form ${HC[*]}" ;;
esac
log "image: user $IMG_USER, workdir ${IMG_WORKDIR:-/}, CMD ${IMG_CMD[*]}"
log "image: HEALTHCHECK ${HC_CMD[*]}"
# The client talks to the same address the HEALTHCHECK uses.
TARGET=127.0.0.1:50051
for ((i = 0; i + 1 < ${#HC_CMD[@]}; i++)); do
  [[ ${HC_CMD[i]} == --target ]] && TARGET=${HC_CMD[i + 1]}
done

# ---- 3. run ------------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/kls-image-test.XXXXXX)
DATA=$WORK/data     # the image's /var/lib/kls
INPUT=$WORK/input   # the image's /tmp: the CSV to upload
mkdir -p "$DATA" "$INPUT"
cp "$ROOT/tests/data/iris.csv" "$INPUT/iris.csv"
chmod 755 "$INPUT" && chmod 644 "$INPUT/iris.csv"

CONTAINER=kls-image-test-$$
MNT=""
NETNS=""
SERVER_PID=""
MOUNTED=()
cleanup() {
  set +e
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
  fi
  [[ $RUN_MODE == container ]] && "$ENGINE" rm -f "$CONTAINER" >/dev/null 2>&1
  for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
    umount "${MOUNTED[i]}" 2>/dev/null || umount -l "${MOUNTED[i]}"
  done
  [[ -n $MNT ]] && podman image unmount "$IMAGE" >/dev/null
  [[ -n $NETNS ]] && ip netns delete "$NETNS"
  rm -rf "$WORK"
}
trap cleanup EXIT

if [[ $RUN_MODE == auto ]]; then
  RUN_MODE=chroot
  [[ $ENGINE == docker ]] && RUN_MODE=container
  if [[ $ENGINE == podman ]]; then
    if probe=$(podman run --rm --network none "$IMAGE" true 2>&1); then
      RUN_MODE=container
    else
      log "podman run does not work here ($(echo "$probe" | tail -1)); running the image with chroot"
    fi
  fi
fi
log "run mode: $RUN_MODE"

if [[ $RUN_MODE == chroot ]]; then
  [[ $ENGINE == podman ]] || fail "the chroot run needs podman (image mount)"
  MNT=$(podman image mount "$IMAGE")
  [[ -d $MNT/usr/local/bin ]] || fail "podman image mount gave '$MNT'"
  IMG_UID=$(awk -F: -v u="$IMG_USER" '$1 == u || $3 == u {print $3; exit}' "$MNT/etc/passwd")
  IMG_GID=$(awk -F: -v u="$IMG_USER" '$1 == u || $3 == u {print $4; exit}' "$MNT/etc/passwd")
  [[ -n $IMG_UID && -n $IMG_GID ]] || fail "user $IMG_USER not in the image's /etc/passwd"
  chown "$IMG_UID:$IMG_GID" "$DATA"
  mount_in_image() { mount "$@"; MOUNTED+=("${@: -1}"); }
  mount_in_image -t proc proc "$MNT/proc"
  mount_in_image --bind /dev "$MNT/dev"
  mount_in_image --bind "$DATA" "$MNT/var/lib/kls"
  mount_in_image --bind "$INPUT" "$MNT/tmp"
  NS=()
  NETNS=kls-image-test-$$
  if ip netns add "$NETNS" 2>/dev/null && ip netns exec "$NETNS" ip link set lo up; then
    NS=(nsenter "--net=/run/netns/$NETNS")
  else
    NETNS=""
    fail "cannot make a network namespace (ip netns add) for the image's port 50051"
  fi
  # Runs "$@" in the image as its user, in its working directory, with its
  # environment; exec, so a background call's $! is the command's own PID.
  in_image_exec() {
    exec "${NS[@]}" chroot --userspec="$IMG_UID:$IMG_GID" --groups="$IMG_GID" "$MNT" \
      /usr/bin/env -i "${IMG_ENV[@]}" HOME="${IMG_WORKDIR:-/}" \
      /bin/sh -c 'cd "$0" && exec "$@"' "${IMG_WORKDIR:-/}" "$@"
  }
  in_image() { (in_image_exec "$@"); }
  start_server() {  # $1: log file
    (in_image_exec "${IMG_CMD[@]}") >"$1" 2>&1 &
    SERVER_PID=$!
  }
  server_alive() { kill -0 "$SERVER_PID" 2>/dev/null; }
  server_status() { cat "/proc/$SERVER_PID/status"; }
  stop_server() {  # SIGTERM; the exit code in STOP_RC
    kill -TERM "$SERVER_PID"
    STOP_RC=0
    wait "$SERVER_PID" || STOP_RC=$?
    SERVER_PID=""
  }
  ldd_in_image() { chroot "$MNT" ldd "$1"; }
  list_bins() { ls "$MNT/usr/local/bin"; }
else
  mkdir -p "$DATA"
  chmod 777 "$DATA"  # the container's user (uid unknown here) owns what it writes
  in_image() { "$ENGINE" exec "$CONTAINER" "$@"; }
  start_server() {
    "$ENGINE" rm -f "$CONTAINER" >/dev/null 2>&1 || true
    "$ENGINE" run -d --name "$CONTAINER" --network none \
      -v "$DATA:/var/lib/kls" -v "$INPUT:/tmp:ro" "$IMAGE" >/dev/null
    SERVER_LOG=$1
  }
  server_alive() { [[ $("$ENGINE" inspect --format '{{.State.Running}}' "$CONTAINER") == true ]]; }
  server_status() { "$ENGINE" exec "$CONTAINER" cat /proc/1/status; }
  stop_server() {
    "$ENGINE" stop --time 30 "$CONTAINER" >/dev/null
    "$ENGINE" logs "$CONTAINER" >"$SERVER_LOG" 2>&1 || true
    STOP_RC=$("$ENGINE" inspect --format '{{.State.ExitCode}}' "$CONTAINER")
  }
  ldd_in_image() { "$ENGINE" run --rm --network none --entrypoint ldd "$IMAGE" "$1"; }
  list_bins() { "$ENGINE" run --rm --network none --entrypoint ls "$IMAGE" /usr/local/bin; }
fi

kls_cli() { in_image kls --target "$TARGET" "$@"; }
wait_healthy() {  # the image's HEALTHCHECK command, until it passes (60 s)
  local out
  for _ in $(seq 1 120); do
    server_alive || { cat "$1" >&2; fail "server exited while starting"; }
    if out=$(in_image "${HC_CMD[@]}" 2>&1); then
      log "HEALTHCHECK passed: $out"
      return
    fi
    sleep 0.5
  done
  cat "$1" >&2
  fail "HEALTHCHECK did not pass within 60 s: $out"
}
queries() {
  kls_cli similarity --kernel iris --pairs "0,1;0,50;0,100;50,100"
  kls_cli topk --kernel iris --item 7 --k 5 --exclude-self
  kls_cli kernels --name iris | awk '{print $1, $2}'
}

# -- shared libraries of every binary in the runtime stage
mapfile -t bins < <(list_bins)
((${#bins[@]} > 0)) || fail "no binaries in /usr/local/bin"
for b in "${bins[@]}"; do
  libs=$(ldd_in_image "/usr/local/bin/$b") || fail "ldd /usr/local/bin/$b: $libs"
  if grep -q 'not found' <<<"$libs"; then
    fail "/usr/local/bin/$b: missing shared libraries in the image:
$(grep 'not found' <<<"$libs")"
  fi
  log "ldd /usr/local/bin/$b: $(grep -c '=>' <<<"$libs") shared libraries, none missing"
done

# -- first start: health, user, upload, learn, query
start_server "$WORK/server1.log"
wait_healthy "$WORK/server1.log"
uid_line=$(server_status | awk '/^Uid:/')
read -r _ ruid euid suid fsuid <<<"$uid_line"
[[ $ruid != 0 && $euid != 0 && $suid != 0 && $fsuid != 0 ]] || fail "server runs as root ($uid_line)"
[[ $RUN_MODE != chroot || $euid == "$IMG_UID" ]] || fail "server uid $euid, want $IMG_UID ($IMG_USER)"
if [[ $RUN_MODE == chroot ]]; then
  exe=$(readlink "/proc/$SERVER_PID/exe")
  [[ $exe == */kls-server ]] || fail "PID $SERVER_PID is $exe, not kls-server"
fi
log "server runs as uid $euid (${IMG_USER}), not root"

upload=$(kls_cli --json upload /tmp/iris.csv --name iris --protocol admm --seed 1) || fail "upload: $upload"
ds=$(sed -nE 's/^  "id": "(ds-[^"]+)".*/\1/p' <<<"$upload")
[[ -n $ds ]] || fail "no data-set id in: $upload"
log "uploaded iris.csv as $ds"
job=$(kls_cli --json submit --dataset "$ds" --kernel iris --method kl_admm --gamma 10 --watch 2>/dev/null) ||
  fail "submit: $job"
grep -q '"state": "SUCCEEDED"' <<<"$job" || fail "job did not succeed: $job"
log "learned kernel iris (kl_admm): $(grep -E '"termination"' <<<"$job" | tr -d ' ,')"
before=$(queries) || fail "queries: $before"
printf '%s\n' "$before" | sed 's/^/    /'

stop_server
[[ $STOP_RC == 0 ]] || { cat "$WORK/server1.log" >&2; fail "SIGTERM: server exit code $STOP_RC, want 0"; }
log "SIGTERM: server exited with 0"

# -- second start on the same data directory: same answers
start_server "$WORK/server2.log"
wait_healthy "$WORK/server2.log"
after=$(queries) || fail "queries after restart: $after"
[[ $after == "$before" ]] || fail "answers differ after restart:
--- before
$before
--- after
$after"
log "after a restart on the same data directory: the same answers"
if [[ $RUN_MODE == chroot ]]; then
  foreign=$(find "$DATA" -mindepth 1 ! -uid "$IMG_UID" | head -3)
  [[ -z $foreign ]] || fail "files in the data directory not owned by $IMG_USER: $foreign"
  log "data directory: $(find "$DATA" -mindepth 1 | wc -l) entries, all owned by $IMG_USER"
fi
stop_server
[[ $STOP_RC == 0 ]] || { cat "$WORK/server2.log" >&2; fail "SIGTERM (second run): exit code $STOP_RC"; }

if [[ $BUILD_SECONDS == reused ]]; then build="not rebuilt"; else build="built in $BUILD_SECONDS s"; fi
log "image $IMAGE: $((SIZE / 1000000)) MB ($SIZE bytes), $build"
log "PASSED in ${SECONDS} s"
