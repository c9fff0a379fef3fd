#!/usr/bin/env bash
# Learn time against n for the NPKL solvers, and its log-log plot.
#
#   bench/scale_sweep.sh BUILD_DIR OUT_DIR [METHOD:N1,N2,...[:own] ...]
#
# Runs `kls-bench scale --method M --n N --constraints 4N --json` (adult-like
# data, 123 binary features, 50-NN graph, 4 pairs per point: the issue's
# 100,000 points / 400,000 pairs ratio) once per (method, n), one at a time;
# with `:own` after the sizes, without --constraints (the method's own paper
# protocol: SimpleNPKL's thesis adult protocol has ~0.47 n pairs). Appends
# every JSON line to OUT_DIR/scale_sweep.jsonl (emptied first unless KEEP=1),
# writes OUT_DIR/scale_sweep.tsv (method, n, constraints, learn_seconds,
# graph_seconds, peak_rss_mb, rank, certified) and, when gnuplot is installed,
# OUT_DIR/scale_sweep.png (learn seconds against n, both axes logarithmic).
# Default sweep: admm and bcd-sl at 2,000 … 100,000 (4n pairs),
# simplenpkl-shl at 2,000 … 20,000 (its own protocol).
set -euo pipefail
build=${1:?usage: scale_sweep.sh BUILD_DIR OUT_DIR [METHOD:N1,N2,...]}
out=${2:?usage: scale_sweep.sh BUILD_DIR OUT_DIR [METHOD:N1,N2,...]}
shift 2
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  specs=(admm:2000,5000,10000,20000,50000,100000 bcd-sl:2000,5000,10000,20000,50000,100000
         simplenpkl-shl:2000,5000,10000,20000:own)
fi
bench="$build/bench/kls-bench"
[ -x "$bench" ] || { echo "no $bench: build first" >&2; exit 1; }
mkdir -p "$out"
jsonl="$out/scale_sweep.jsonl"
[ "${KEEP:-0}" = 1 ] || : > "$jsonl"
for spec in "${specs[@]}"; do
  IFS=: read -r method list own <<< "$spec"
  IFS=, read -r -a sizes <<< "$list"
  for n in "${sizes[@]}"; do
    echo "== $method n=$n ${own:+own protocol }(load $(cut -d' ' -f1 /proc/loadavg))" >&2
    pairs=(--constraints $((4 * n)))
    [ "$own" = own ] && pairs=()
    "$bench" scale --method "$method" --n "$n" "${pairs[@]}" --json | tail -n 1 >> "$jsonl"
  done
done
/usr/bin/python3 - "$jsonl" "$out/scale_sweep.tsv" <<'EOF'
import json, sys
rows = sorted((json.loads(line) for line in open(sys.argv[1]) if line.strip()), key=lambda r: (r["method"], r["n"]))
with open(sys.argv[2], "w") as f:
    f.write("method\tn\tconstraints\tlearn_seconds\tgraph_seconds\tpeak_rss_mb\trank\tcertified\n")
    for r in rows:
        f.write("%s\t%d\t%d\t%.3f\t%.3f\t%.0f\t%d\t%s\n" % (r["method"], r["n"], r["constraints"], r["learn_seconds"],
                r["graph_seconds"], r["peak_rss_mb"], r["rank"], r.get("certified", "")))
EOF
if command -v gnuplot > /dev/null; then
  methods=$(cut -f1 "$out/scale_sweep.tsv" | tail -n +2 | sort -u)
  plot=""
  for m in $methods; do
    ratio=$(awk -F'\t' -v m="$m" '$1 == m { printf "%.2g", $3 / $2; exit }' "$out/scale_sweep.tsv")
    plot="$plot${plot:+, }'< grep -P \"^$m\\t\" $out/scale_sweep.tsv' using 2:4 with linespoints title '$m ($ratio n pairs)'"
  done
  gnuplot <<EOF
set terminal pngcairo size 900,600 noenhanced
set output '$out/scale_sweep.png'
set logscale xy
set xlabel 'n (points)'
set ylabel 'learn seconds (graph excluded)'
set title 'kls-bench scale: adult-like data, 2 cores'
set key left top
set grid
$( [ -n "$plot" ] && echo "plot $plot" )
EOF
fi
cat "$out/scale_sweep.tsv"
