#!/usr/bin/env bash
# Learn time against n for the NPKL solvers, and its log-log plot.
#
#   bench/scale_sweep.sh BUILD_DIR OUT_DIR [METHOD:N1,N2,... ...]
#
# Runs `kls-bench scale --method M --n N --constraints 4N --json` (adult-like
# data, 123 binary features, 50-NN graph, 4 pairs per point: the issue's
# 100,000 points / 400,000 pairs ratio) once per (method, n), one at a time,
# appends every JSON line to OUT_DIR/scale_sweep.jsonl, writes
# OUT_DIR/scale_sweep.tsv (method, n, learn_seconds, graph_seconds,
# peak_rss_mb, rank, certified) and, when gnuplot is installed,
# OUT_DIR/scale_sweep.png (learn seconds against n, both axes logarithmic).
# Default sweep: admm and bcd-sl at 2,000 … 100,000, simplenpkl-shl at
# 2,000 … 20,000.
set -euo pipefail
build=${1:?usage: scale_sweep.sh BUILD_DIR OUT_DIR [METHOD:N1,N2,...]}
out=${2:?usage: scale_sweep.sh BUILD_DIR OUT_DIR [METHOD:N1,N2,...]}
shift 2
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  specs=(admm:2000,5000,10000,20000,50000,100000 bcd-sl:2000,5000,10000,20000,50000,100000
         simplenpkl-shl:2000,5000,10000,20000)
fi
bench="$build/bench/kls-bench"
[ -x "$bench" ] || { echo "no $bench: build first" >&2; exit 1; }
mkdir -p "$out"
jsonl="$out/scale_sweep.jsonl"
: > "$jsonl"
for spec in "${specs[@]}"; do
  method=${spec%%:*}
  IFS=, read -r -a sizes <<< "${spec#*:}"
  for n in "${sizes[@]}"; do
    echo "== $method n=$n (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    "$bench" scale --method "$method" --n "$n" --constraints $((4 * n)) --json | tail -n 1 >> "$jsonl"
  done
done
/usr/bin/python3 - "$jsonl" "$out/scale_sweep.tsv" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
with open(sys.argv[2], "w") as f:
    f.write("method\tn\tlearn_seconds\tgraph_seconds\tpeak_rss_mb\trank\tcertified\n")
    for r in rows:
        f.write("%s\t%d\t%.3f\t%.3f\t%.0f\t%d\t%s\n" % (r["method"], r["n"], r["learn_seconds"], r["graph_seconds"],
                r["peak_rss_mb"], r["rank"], r.get("certified", "")))
EOF
if command -v gnuplot > /dev/null; then
  methods=$(cut -f1 "$out/scale_sweep.tsv" | tail -n +2 | sort -u)
  plot=""
  for m in $methods; do
    plot="$plot${plot:+, }'< grep -P \"^$m\\t\" $out/scale_sweep.tsv' using 2:3 with linespoints title '$m'"
  done
  gnuplot <<EOF
set terminal pngcairo size 900,600 noenhanced
set output '$out/scale_sweep.png'
set logscale xy
set xlabel 'n (points; 4n pairwise constraints)'
set ylabel 'learn seconds (graph excluded)'
set title 'kls-bench scale: adult-like data, 2 cores'
set key left top
set grid
$( [ -n "$plot" ] && echo "plot $plot" )
EOF
fi
cat "$out/scale_sweep.tsv"
