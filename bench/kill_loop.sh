#!/usr/bin/env bash
# kill_loop.sh: the operations issue's kill loop. One kls-server (embedded
# store) with JOBS long learning jobs queued or running is killed with
# SIGKILL KILLS times at random 1–3 s intervals and restarted each time; then
# every job runs to its end. Prints how many jobs ended FAILED (innocent jobs:
# nothing is wrong with them), SUCCEEDED and the iterations their kernels'
# summaries say were resumed from.
#   bash bench/kill_loop.sh [BUILD_DIR] [KILLS] [JOBS] [SEED]
set -euo pipefail
BUILD=${1:-build}; KILLS=${2:-12}; JOBS=${3:-9}; SEED=${4:-1}
DIR=$(mktemp -d /tmp/kls-kill-loop.XXXXXX)
SERVER=$BUILD/server/kls-server; KLS=$BUILD/client/kls
RANDOM=$SEED
start() {
  "$SERVER" --listen 127.0.0.1:0 --data-dir "$DIR/data" --workers 2 >>"$DIR/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do
    TARGET=$(sed -n 's/^listen=//p' "$DIR/data/kls-server.lock" 2>/dev/null || true)
    if [[ -n "$TARGET" ]] && "$KLS" --target "$TARGET" health >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  echo "kill_loop: the server did not start" >&2; exit 2
}
start
K="$KLS --target $TARGET"
$K upload tests/data/breast_cancer_wisconsin_original.csv --name bc --protocol admm --no-progress >/dev/null
for j in $(seq "$JOBS"); do
  # Long enough (tens of seconds each) that the kill loop hits every job.
  $K submit --dataset bc --kernel "bc$j" --method kl_admm --max-iterations 20000 --tolerance 0 >/dev/null
done
for k in $(seq "$KILLS"); do
  sleep "$(( 1 + RANDOM % 3 )).$(( RANDOM % 10 ))"
  kill -9 "$PID"; wait "$PID" 2>/dev/null || true
  rm -f "$DIR/data/kls-server.lock.listen" 2>/dev/null || true
  start
  K="$KLS --target $TARGET"
done
# Let every job finish.
for _ in $(seq 1200); do
  left=$($K --json list 2>>"$DIR/kls.err" | /usr/bin/python3 -c 'import json,sys; print(sum(j["state"] in ("QUEUED","RUNNING") for j in json.load(sys.stdin)["jobs"]))')
  [[ "$left" == 0 ]] && break
  sleep 1
done
$K --json list | /usr/bin/python3 -c '
import json, sys
jobs = json.load(sys.stdin)["jobs"]
failed = [j for j in jobs if j["state"] == "FAILED"]
ok = [j for j in jobs if j["state"] == "SUCCEEDED"]
print(json.dumps({"jobs": len(jobs), "succeeded": len(ok), "failed": len(failed),
                  "errors": sorted({j["error"][:90] for j in failed}),
                  "attempts": sorted(j["attempts"] for j in jobs)}))'
kill "$PID"; wait "$PID" 2>/dev/null || true
[[ -n "${KEEP:-}" ]] || rm -rf "$DIR"
