#!/usr/bin/env bash
# Builds Abseil, protobuf and gRPC with ThreadSanitizer into PREFIX, from
# Debian 12's own source packages (the same upstream versions and Debian
# patches as the libabsl / libprotobuf / libgrpc++ packages the normal build
# links), so that `make test SANITIZE=thread` sees the synchronization inside
# them. Without it ThreadSanitizer reports every hand-off of memory through
# gRPC's uninstrumented locks as a race (docs/RELIABILITY.md, "Sanitizers").
#
#   tests/sanitizers/build_tsan_deps.sh PREFIX [JOBS]
#
# Static, position-independent libraries with -fsanitize=thread -O1 -g1, C++17
# (the project's standard), built by the same g++ as the project. re2, c-ares,
# zlib and OpenSSL stay Debian's: their locks are pthread mutexes, which the
# ThreadSanitizer runtime intercepts. Takes about an hour on 2 cores; a second
# call returns at once (PREFIX/.kls-tsan-deps records what was built).
# Needs root for apt (it adds a deb-src entry for bookworm if none exists).
set -euo pipefail

PREFIX=${1:?usage: build_tsan_deps.sh PREFIX [JOBS]}
JOBS=${2:-$(nproc)}
PACKAGES=(abseil protobuf grpc)
STAMP="$PREFIX/.kls-tsan-deps"
mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)

want_stamp() {
  local p
  for p in "${PACKAGES[@]}"; do
    printf '%s %s\n' "$p" "$(apt-cache showsrc "$p" 2>/dev/null | sed -n 's/^Version: //p' | head -1)"
  done
  echo "flags -fsanitize=thread -O1 -g1 c++17 static $(g++ -dumpfullversion)"
}

# Source entries: `apt-get source` needs deb-src lines, which a fresh Debian
# image lacks.
if ! apt-cache showsrc grpc 2>/dev/null | grep -q '^Package: grpc'; then
  cat >/etc/apt/sources.list.d/kls-deb-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -qq
fi
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(want_stamp)" ]; then
  echo "build_tsan_deps: $PREFIX is up to date"
  exit 0
fi
# Build dependencies of gRPC that the normal build does not need.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  dpkg-dev libre2-dev libc-ares-dev libssl-dev zlib1g-dev >/dev/null

# A package whose stamp is missing (or from other versions) is built again;
# one that finished in an interrupted earlier call is kept.
SRC="$PREFIX/src"
mkdir -p "$SRC"
cd "$SRC"
if [ "$(cat "$PREFIX/.kls-tsan-want" 2>/dev/null)" != "$(want_stamp)" ]; then
  rm -rf "$SRC"/* "$PREFIX"/.built-*
  want_stamp >"$PREFIX/.kls-tsan-want"
fi
for p in "${PACKAGES[@]}"; do
  [ -f "$PREFIX/.built-$p" ] || ls -d "$SRC/$p"-*/ >/dev/null 2>&1 || apt-get source -qq "$p" >/dev/null
done

FLAGS="-fsanitize=thread -O1 -g1 -fno-omit-frame-pointer"
configure_and_install() {  # SOURCE_DIR BUILD_NAME cmake-args...
  local src=$1 name=$2
  shift 2
  [ -f "$PREFIX/.built-$name" ] && return 0
  cmake -S "$src" -B "$SRC/build-$name" -G Ninja -Wno-dev \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$FLAGS" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$FLAGS" \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread \
    -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_PREFIX_PATH="$PREFIX" \
    "$@"
  cmake --build "$SRC/build-$name" -j "$JOBS"
  cmake --install "$SRC/build-$name" >/dev/null
  touch "$PREFIX/.built-$name"
}

srcdir() { ls -d "$SRC/$1"-*/ 2>/dev/null | head -1; }
configure_and_install "$(srcdir abseil)" abseil \
  -DABSL_PROPAGATE_CXX_STD=ON -DABSL_BUILD_TESTING=OFF -DBUILD_TESTING=OFF
configure_and_install "$(srcdir protobuf)" protobuf \
  -Dprotobuf_BUILD_TESTS=OFF -Dprotobuf_BUILD_SHARED_LIBS=OFF -Dprotobuf_WITH_ZLIB=OFF \
  -Dprotobuf_BUILD_LIBPROTOC=ON -Dprotobuf_BUILD_PROTOC_BINARIES=ON
# Only the C++ code-generator plugin is needed (the project's proto/ runs it).
configure_and_install "$(srcdir grpc)" grpc \
  -DgRPC_INSTALL=ON -DgRPC_BUILD_TESTS=OFF -DgRPC_BACKWARDS_COMPATIBILITY_MODE=OFF \
  -DgRPC_ABSL_PROVIDER=package -DgRPC_CARES_PROVIDER=package -DgRPC_PROTOBUF_PROVIDER=package \
  -DgRPC_PROTOBUF_PACKAGE_TYPE=CONFIG -DgRPC_RE2_PROVIDER=package -DgRPC_SSL_PROVIDER=package \
  -DgRPC_ZLIB_PROVIDER=package -DgRPC_BUILD_CODEGEN=ON -DgRPC_BUILD_GRPC_CPP_PLUGIN=ON \
  -DgRPC_BUILD_GRPC_CSHARP_PLUGIN=OFF -DgRPC_BUILD_GRPC_NODE_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_OBJECTIVE_C_PLUGIN=OFF -DgRPC_BUILD_GRPC_PHP_PLUGIN=OFF \
  -DgRPC_BUILD_GRPC_PYTHON_PLUGIN=OFF -DgRPC_BUILD_GRPC_RUBY_PLUGIN=OFF -DgRPC_BUILD_CSHARP_EXT=OFF

rm -rf "$SRC"
want_stamp >"$STAMP"
echo "build_tsan_deps: installed into $PREFIX"
