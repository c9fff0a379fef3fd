#!/usr/bin/env bash
# A million points through the real binaries (issue 41, item 3): upload,
# learn, kill -9, resume, restart, identical answers.
#
#   bench/million_e2e.sh [--n N] [--build DIR] [--work DIR] [--checkpoint-seconds S]
#                        [--graph-search auto|exact|ivf|hnsw] [--kill-after-checkpoints C]
#                        [--max-iterations I] [--tolerance T] [--no-sparse] [--upload-only] [--keep]
#
# 1. Generates N rows (default 1,000,000) with bench/million_e2e_data.py: dense
#    CSV, 32 features, 2 Gaussian classes, with 4 N random pairs (half
#    must-link; the issue's 4,000,000 at a million, so that almost every point
#    is constrained); and (unless --no-sparse) adult-like LIBSVM, 123 binary
#    features, 14 non-zeros a row, 2 classes.
# 2. Starts kls-server (embedded store in WORK/data, one worker) and uploads
#    each file with `kls upload` (the dense set with its pairs file, the sparse
#    one with --protocol bcd: the server draws 1.2 N pairs from the labels;
#    only the dense set is learned). The server's peak RSS is reset before
#    each upload (/proc/PID/clear_refs) and read after it (VmHWM): the
#    upload's own peak, next to the size of the feature matrix it stores
#    (N x d doubles).
#    With --upload-only the script stops here and prints the uploads' JSON.
# 3. Submits a bcd_npkl square-loss job on the dense set (--graph-search auto:
#    IVF above 50,000 points), waits for C "checkpoint at iteration" lines
#    (default 2: the first comes after the first sweep, the next
#    --checkpoint-seconds later), kill -9s the server and starts it again on
#    the same data directory: the job resumes from the checkpoint (summary
#    resumed_from_iteration > 0) and succeeds.
# 4. Asks the kernel for similarities and top-10s (kls similarity / topk
#    --json), kill -9s and restarts the server once more (time to SERVING and
#    to the first answer) and asks again: the answers must be identical.
#
# Prints one JSON line on stdout (progress on stderr); exits 1 when a check
# fails (resumed_from_iteration = 0, the job not SUCCEEDED, answers differ).
# The binaries are copied into WORK first, so a rebuild of the tree during the
# run does not mix versions. A million points took 15 minutes and 6.7 GB of
# server RSS on the 2-core VM (docs/BENCHMARKS.md, "Through the service").
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
n=1000000
build="$here/../build"
work=""
checkpoint_seconds=30
graph_search=auto
kill_after=2
max_iterations=""
tolerance=""
sparse=1
upload_only=0
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --n) n=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --checkpoint-seconds) checkpoint_seconds=$2; shift 2 ;;
    --graph-search) graph_search=$2; shift 2 ;;
    --kill-after-checkpoints) kill_after=$2; shift 2 ;;
    --max-iterations) max_iterations=$2; shift 2 ;;
    --tolerance) tolerance=$2; shift 2 ;;
    --no-sparse) sparse=0; shift ;;
    --upload-only) upload_only=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
[ -x "$build/server/kls-server" ] && [ -x "$build/client/kls" ] || {
  echo "no $build/server/kls-server or $build/client/kls: build them first" >&2; exit 1; }
py=/usr/bin/python3
[ -n "$work" ] || work=$(mktemp -d /tmp/kls-million-e2e.XXXXXX)
mkdir -p "$work/bin"
cp "$build/server/kls-server" "$build/client/kls" "$work/bin/"
server_bin="$work/bin/kls-server"
log="$work/server.log"
port=$($py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
target="127.0.0.1:$port"
kls=("$work/bin/kls" --target "$target" --timeout-seconds 600)
health=("$work/bin/kls" --target "$target" --timeout-seconds 1 health)
server_pid=""

say() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
now() { date +%s.%N; }
since() { $py -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$1" "$(now)"; }
status_kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$server_pid/status"; }
mb() { $py -c "import sys; print(round(int(sys.argv[1]) / 1024, 1))" "$1"; }
cleanup() {
  if [ -n "$server_pid" ]; then kill -9 "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [ "$keep" = 0 ]; then rm -rf "$work"; else say "kept $work"; fi
}
trap cleanup EXIT

# Starts the server on WORK/data; sets server_pid, and serving_seconds to the
# seconds until it is SERVING.
start_server() {
  local t0; t0=$(now)
  "$server_bin" --listen "$target" --data-dir "$work/data" --workers 1 --log-level info \
    --checkpoint-seconds "$checkpoint_seconds" >> "$work/server.out" 2>> "$log" &
  server_pid=$!
  for _ in $(seq 1 6000); do
    kill -0 "$server_pid" 2>/dev/null || { say "kls-server exited:"; tail -20 "$log" >&2; exit 1; }
    if "${health[@]}" >/dev/null 2>&1; then serving_seconds=$(since "$t0"); return; fi
    sleep 0.05
  done
  say "kls-server not serving after 300 s"; exit 1
}
kill9() { kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""; }

# upload FILE NAME D [kls upload flags]: uploads; prints "seconds peak_rss_mb
# rss_before_mb matrix_mb file_mb".
upload() {
  local file=$1 name=$2 d=$3 before t0 seconds peak
  shift 3
  echo 5 > "/proc/$server_pid/clear_refs"  # VmHWM := VmRSS
  before=$(status_kb VmRSS)
  t0=$(now)
  "${kls[@]}" --json upload "$file" --name "$name" --no-progress "$@" > "$work/upload-$name.json"
  seconds=$(since "$t0")
  peak=$(status_kb VmHWM)
  echo "$seconds $(mb "$peak") $(mb "$before") $($py -c "import sys; print(round(int(sys.argv[1]) * int(sys.argv[2]) * 8 / 2**20, 1))" "$n" "$d") $($py -c "import os, sys; print(round(os.path.getsize(sys.argv[1]) / 2**20, 1))" "$file")"
}

# The answers a client gets: similarities of fixed pairs and the top-10 of
# five items, as the CLI prints them (--json: doubles round-trip exactly).
answers() {
  local last=$((n - 1))
  "${kls[@]}" --json similarity --kernel million:1 --pairs "0,1;2,3;$((n / 2)),$last;17,17;$last,0"
  for item in 0 1 $((n / 3)) $((n / 2)) "$last"; do
    "${kls[@]}" --json topk --kernel million:1 --item "$item" --k 10
  done
}

say "work dir $work, n = $n"
t0=$(now)
$py "$here/million_e2e_data.py" dense "$n" "$work/dense.csv" --pairs $((4 * n))
[ "$sparse" = 0 ] || $py "$here/million_e2e_data.py" libsvm "$n" "$work/sparse.libsvm"
gen_seconds=$(since "$t0")
say "data generated in $gen_seconds s"

start_server
read -r up_s up_peak up_before up_matrix up_file <<< "$(upload "$work/dense.csv" dense 32 --constraints "$work/dense.csv.pairs")"
say "dense upload: $up_s s, peak RSS $up_peak MB (before $up_before MB), matrix $up_matrix MB, file $up_file MB"
sp_json=null
if [ "$sparse" = 1 ]; then
  read -r sp_s sp_peak sp_before sp_matrix sp_file <<< "$(upload "$work/sparse.libsvm" sparse 123 --protocol bcd)"
  say "sparse upload: $sp_s s, peak RSS $sp_peak MB (before $sp_before MB), matrix $sp_matrix MB, file $sp_file MB"
  sp_json="{\"upload_seconds\":$sp_s,\"peak_rss_mb\":$sp_peak,\"rss_before_mb\":$sp_before,\"matrix_mb\":$sp_matrix,\"file_mb\":$sp_file}"
  rm -f "$work/sparse.libsvm"
fi
rm -f "$work/dense.csv" "$work/dense.csv.pairs"
if [ "$upload_only" = 1 ]; then
  jq -cn --argjson n "$n" --argjson gen "$gen_seconds" \
    --argjson up "{\"upload_seconds\":$up_s,\"peak_rss_mb\":$up_peak,\"rss_before_mb\":$up_before,\"matrix_mb\":$up_matrix,\"file_mb\":$up_file}" \
    --argjson sparse "$sp_json" '{n: $n, data_seconds: $gen, upload_dense: $up, upload_sparse: $sparse}'
  exit 0
fi

solver=()
[ -z "$max_iterations" ] || solver+=(--max-iterations "$max_iterations")
[ -z "$tolerance" ] || solver+=(--tolerance "$tolerance")
job=$("${kls[@]}" --json submit --dataset dense --kernel million --method bcd_npkl --loss square \
        --graph-search "$graph_search" "${solver[@]}" | jq -r .id)
job_t0=$(now)
say "job $job submitted"
while [ "$(grep -c "job $job: checkpoint at iteration" "$log" || true)" -lt "$kill_after" ]; do
  kill -0 "$server_pid" 2>/dev/null || { say "kls-server exited"; tail -20 "$log" >&2; exit 1; }
  state=$("${kls[@]}" --json get "$job" | jq -r .state)
  [ "$state" = RUNNING ] || [ "$state" = QUEUED ] || { say "job $state before its checkpoint"; exit 1; }
  sleep 1
done
first_checkpoint_seconds=$(since "$job_t0")
killed_at=$(grep "job $job: checkpoint at iteration" "$log" | tail -1 | sed 's/.*iteration \([0-9]*\).*/\1/')
job_peak_before_kill=$(mb "$(status_kb VmHWM)")
kill9
say "kill -9 after the checkpoint at iteration $killed_at ($first_checkpoint_seconds s after submit)"
start_server
restart1=$serving_seconds
say "restarted: serving in $restart1 s"
resume_t0=$(now)
while :; do
  state=$("${kls[@]}" --json get "$job" | jq -r .state)
  [ "$state" = RUNNING ] || [ "$state" = QUEUED ] || break
  kill -0 "$server_pid" 2>/dev/null || { say "kls-server exited"; tail -20 "$log" >&2; exit 1; }
  sleep 2
done
resumed_seconds=$(since "$resume_t0")
job_peak_mb=$(mb "$(status_kb VmHWM)")
"${kls[@]}" --json get "$job" > "$work/job.json"
say "job $state $resumed_seconds s after the restart"
summary() { jq -c "(.summary // {}) | $1" "$work/job.json"; }

answers > "$work/answers1.json"
kill9
start_server
restart2=$serving_seconds
t1=$(now)
"${kls[@]}" --json topk --kernel million:1 --item 0 --k 10 > /dev/null
first_answer=$(since "$t1")
answers > "$work/answers2.json"
identical=false
cmp -s "$work/answers1.json" "$work/answers2.json" && identical=true
kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

resumed_from=$(summary '.resumed_from_iteration // 0')
search=$(summary '.graph.search // ""' | tr -d '"')
result=$(jq -cn \
  --argjson n "$n" --arg state "$state" --argjson gen "$gen_seconds" \
  --argjson up "{\"upload_seconds\":$up_s,\"peak_rss_mb\":$up_peak,\"rss_before_mb\":$up_before,\"matrix_mb\":$up_matrix,\"file_mb\":$up_file}" \
  --argjson sparse "$sp_json" --argjson killed "$killed_at" --argjson first_ckpt "$first_checkpoint_seconds" \
  --argjson r1 "$restart1" --argjson resumed_s "$resumed_seconds" --argjson r2 "$restart2" \
  --argjson first "$first_answer" --argjson identical "$identical" \
  --argjson peak_kill "$job_peak_before_kill" --argjson peak_job "$job_peak_mb" \
  --argjson s "$(summary '.')" --argjson stats "$(jq -c '{attempts, progress, termination}' "$work/job.json")" '
  {n: $n, data_seconds: $gen, upload_dense: $up, upload_sparse: $sparse,
   job: {state: $state, attempts: $stats.attempts, termination: $stats.termination,
         graph: $s.graph, graph_seconds: $s.graph.knn_seconds,
         setup_seconds: $s.setup_seconds, solve_seconds: $s.solve_seconds, seconds: $s.seconds,
         iterations: ($s.iterations // $stats.progress.iteration),
         certificate: ($s.certificate // null),
         seconds_to_first_checkpoint: $first_ckpt, killed_after_checkpoint: $killed,
         resumed_from_iteration: ($s.resumed_from_iteration // 0),
         seconds_after_restart_to_done: $resumed_s,
         peak_rss_mb_before_kill: $peak_kill, peak_rss_mb_resumed: $peak_job},
   restart_to_serving_seconds: [$r1, $r2], first_topk_after_restart_seconds: $first,
   identical: $identical}')
echo "$result"
ok=1
[ "$state" = SUCCEEDED ] || { say "FAIL: job $state"; ok=0; }
[ "$resumed_from" -gt 0 ] || { say "FAIL: resumed_from_iteration = $resumed_from"; ok=0; }
[ "$identical" = true ] || { say "FAIL: answers differ after the restart"; ok=0; }
grep -q '"items"' "$work/answers1.json" || { say "FAIL: no top-k answers"; ok=0; }
[ "$graph_search" != auto ] || [ "$n" -le 50000 ] || [ "$search" = ivf ] || { say "FAIL: graph search $search"; ok=0; }
[ "$ok" = 1 ]
