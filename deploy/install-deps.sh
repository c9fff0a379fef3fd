#!/usr/bin/env bash
# Installs every Debian 12 package KLS needs to build, test and run.
# Idempotent: installs only what is missing, and runs `apt-get update` only
# when something is. Used by the Makefile (make run / make test) and the
# Dockerfile. Pass --runtime-only for the runtime libraries alone.
set -euo pipefail

BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev        # dense/sparse linear algebra (core)
  libspectra-dev       # Lanczos eigen-solvers on operators (SimpleNPKL, QSDP)
  liblbfgspp-dev       # L-BFGS on the smooth embedding duals (CMVU, MVE); Spectra's author, Eigen-based
  liblapacke-dev       # LAPACK dstemr (MRRR): only the positive eigenpairs of a dense A (DensePositiveSpectrum)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # service
  libspdlog-dev        # server logging
  libsqlite3-dev zlib1g-dev  # metadata store; artifact checksums (crc32)
  libpq-dev postgresql # shared store for several replicas (libpq); tests start a throwaway server
  libcli11-dev         # command-line parsing (kls, kls-server, kls-bench)
  nlohmann-json3-dev   # JSON output (kls --json, kls-bench --json)
  libgtest-dev libgmock-dev  # tests
  coinor-csdp          # exact SDP solver used as a test oracle and QSDP baseline peer
  libsvm-dev           # SVM with precomputed kernels (ONK, MKL classifiers)
  libglpk-dev          # LP for the level method's lower bound (ONK)
  libfaiss-dev         # FAISS IndexFlatIP: the peer of kls-bench topk
  gnuplot-nox          # PNG scatter plots of embeddings (kls-bench embed --plot)
  libssl-dev openssl   # SHA-256 of bearer tokens (server/auth); test certificates (tls_test)
  python3-yaml         # tests/deploy: parse the rendered k8s manifests and docker-compose.yml
)
# Metrics: prometheus-cpp serves GET /metrics (--metrics-listen); promtool
# (package prometheus) checks the scrape and deploy/prometheus in the tests.
BUILD_PACKAGES+=(prometheus-cpp-dev prometheus)
# tests/deploy renders deploy/k8s with `kubectl kustomize`. Debian's kubectl is
# kubernetes-client (1.20: renders the base, not kustomize Components); any
# kubectl already on PATH (often newer) is kept — installing the package over
# another one's /usr/bin/kubectl would fail.
if ! command -v kubectl >/dev/null 2>&1; then
  BUILD_PACKAGES+=(kubernetes-client)
fi
RUNTIME_PACKAGES=(libgrpc++1.51 libprotobuf32 libspdlog1.10 libsqlite3-0 libpq5 zlib1g libsvm3 libglpk40 liblapacke ca-certificates)
RUNTIME_PACKAGES+=(libprometheus-cpp-pull1.0 libprometheus-cpp-core1.0 libcivetweb1)  # metrics endpoint

if [[ "${1:-}" == "--runtime-only" ]]; then
  wanted=("${RUNTIME_PACKAGES[@]}")
else
  wanted=("${BUILD_PACKAGES[@]}")
fi

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#wanted[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
