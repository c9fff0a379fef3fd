#!/usr/bin/env bash
# The crash soak (`kls-bench crash`, bench/crash_soak.h) against the shared
# PostgreSQL store: starts a throw-away PostgreSQL (bench/scratch_postgres.sh)
# and runs kls-bench crash --store on it; the soak's flags follow "--".
#
#   bench/crash_postgres.sh [BUILD_DIR] [-- kls-bench crash flags]
#   e.g. bench/crash_postgres.sh build -- --kills 100 --json
set -euo pipefail
BUILD=${1:-build}
shift || true
[[ "${1:-}" == "--" ]] && shift
BENCH="$BUILD/bench/kls-bench"
[[ -x "$BENCH" && -x "$BUILD/server/kls-server" ]] || { echo "build $BENCH and kls-server first" >&2; exit 2; }
source "$(dirname "$0")/scratch_postgres.sh"
start_scratch_postgres
"$BENCH" crash --store "$URI" "$@"
