#!/usr/bin/env bash
# Query throughput and latency of one kls-server replica against three, all on
# one throwaway PostgreSQL store on this machine (docs/BENCHMARKS.md, "Scaling
# out"). Starts PostgreSQL (initdb in a temporary directory, a free loopback
# port, durable settings as in production: fsync on), three replicas with
# --store, imports one random kernel through replica 1, then runs
# `kls-bench load` for similarity and top-k twice in one invocation each:
# against replica 1 alone and against all three (the clients spread round
# robin). Prints both JSON results and the p99 ratio; cleans up on exit.
#
#   [N=items DIM=dim] bench/replicas_load.sh [BUILD_DIR] [-- extra kls-bench load flags]
#   e.g. N=20000 DIM=32 bench/replicas_load.sh build -- --clients 4 --seconds 12 --rounds 3
set -euo pipefail

BUILD=${1:-build}
shift || true
[[ "${1:-}" == "--" ]] && shift
EXTRA=("$@")
SERVER="$BUILD/server/kls-server"
BENCH="$BUILD/bench/kls-bench"
[[ -x "$SERVER" && -x "$BENCH" ]] || { echo "build $SERVER and $BENCH first" >&2; exit 2; }

source "$(dirname "$0")/scratch_postgres.sh"
start_scratch_postgres

TARGETS=()
for i in 1 2 3; do
  port=$(free_port)
  "$SERVER" --listen "127.0.0.1:$port" --store "$URI" --cache-dir "$WORK/cache$i" --workers 1 \
    --log-level warn >"$WORK/replica$i.log" 2>&1 &
  PIDS+=($!)
  TARGETS+=("127.0.0.1:$port")
done
for t in "${TARGETS[@]}"; do
  for _ in $(seq 100); do
    "$BUILD/client/kls" --target "$t" health --service kls.v1.Queries >/dev/null 2>&1 && break
    sleep 0.1
  done
done

# One kernel for both runs: a random embedding imported once through replica 1
# (named kls-bench-load-<seed>, version 1 on this fresh store) and kept.
"$BENCH" load --target "${TARGETS[0]}" --rpc similarity --seconds 0.5 --seed 1 --keep-kernel --json \
  --n "${N:-20000}" --dim "${DIM:-32}" >/dev/null
REF="kls-bench-load-1:1"

ALL=$(IFS=,; echo "${TARGETS[*]}")
ONE_JSON=$("$BENCH" load --target "${TARGETS[0]}" --rpc similarity,topk --kernel "$REF" --json "${EXTRA[@]}")
THREE_JSON=$("$BENCH" load --target "$ALL" --rpc similarity,topk --kernel "$REF" --json "${EXTRA[@]}")
echo "one replica:    $ONE_JSON"
echo "three replicas: $THREE_JSON"
/usr/bin/python3 - "$ONE_JSON" "$THREE_JSON" <<'EOF'
import json, sys
one, three = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for rpc in ("similarity", "topk"):
    a, b = one["results"][rpc], three["results"][rpc]
    print(f"{rpc:10s} 1 replica: {a['qps']:9.0f} qps p99 {a['p99_ms']:.3f} ms | "
          f"3 replicas: {b['qps']:9.0f} qps p99 {b['p99_ms']:.3f} ms | p99 ratio {b['p99_ms'] / a['p99_ms']:.2f}")
EOF
