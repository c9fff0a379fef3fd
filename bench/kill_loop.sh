#!/usr/bin/env bash
# kill_loop.sh: the operations issue's kill loop. One kls-server (embedded
# store) with JOBS long learning jobs queued or running is killed with
# SIGKILL KILLS times at random 1–3 s intervals and restarted each time; then
# every job runs to its end. Prints how many jobs ended FAILED (innocent jobs:
# nothing is wrong with them) and SUCCEEDED, their attempts and counted
# failures, and from the server log the lost attempts (process_lost, re-queued
# after a back-off), how many of them had no checkpoint progress, the longest
# run of those and the longest back-off.
#   bash bench/kill_loop.sh [BUILD_DIR] [KILLS] [JOBS] [SEED] [MIN_MS MAX_MS]
# MIN_MS MAX_MS: kill intervals drawn from [MIN_MS, MAX_MS] instead of 1–3 s
# (faster than the first checkpoint: every lost attempt without progress).
set -euo pipefail
BUILD=${1:-build}; KILLS=${2:-12}; JOBS=${3:-9}; SEED=${4:-1}; MIN_MS=${5:-}; MAX_MS=${6:-}
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
  if [[ -n "$MIN_MS" ]]; then
    ms=$(( MIN_MS + RANDOM % (MAX_MS - MIN_MS + 1) )); sleep "$(( ms / 1000 )).$(printf %03d $(( ms % 1000 )))"
  else
    sleep "$(( 1 + RANDOM % 3 )).$(( RANDOM % 10 ))"
  fi
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
import json, re, sys
jobs = json.load(sys.stdin)["jobs"]
failed = [j for j in jobs if j["state"] == "FAILED"]
ok = [j for j in jobs if j["state"] == "SUCCEEDED"]
# The server log: one line per lost attempt (re-queued after its back-off).
lost = [(float(m.group(1)), int(m.group(2))) for m in
        re.finditer(r"re-queued after ([0-9.]+) s \(([0-9]+) lost in a row", open(sys.argv[1]).read())]
print(json.dumps({"jobs": len(jobs), "succeeded": len(ok), "failed": len(failed),
                  "errors": sorted({j["error"][:90] for j in failed}),
                  "attempts": sorted(j["attempts"] for j in jobs),
                  "counted_failures": sum(j.get("counted_failures", 0) for j in jobs),
                  "lost_attempts": len(lost),
                  "lost_without_progress": sum(1 for b, n in lost if n > 0),
                  "max_lost_in_a_row": max([n for b, n in lost] or [0]),
                  "max_backoff_seconds": max([b for b, n in lost] or [0])}))' "$DIR/server.log"
kill "$PID"; wait "$PID" 2>/dev/null || true
[[ -n "${KEEP:-}" ]] || rm -rf "$DIR"
