#!/usr/bin/env bash
# Plots time per node against N for the launch suite of a kdag-bench JSON
# file (one line per case, GPU and host time side by side), with gnuplot.
#   tools/plot-launch.sh bench/results/h200-2026-12-02.json bench/results/h200-2026-12-02-launch.png
set -euo pipefail
json=${1:?usage: $0 RESULTS.json OUT.png}
png=${2:?usage: $0 RESULTS.json OUT.png}
command -v gnuplot >/dev/null || { echo "gnuplot is needed: apt-get install gnuplot-nox" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One data file per case and metric: N, median (us), min, max.
python3 - "$json" "$tmp" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
out = sys.argv[2]
rows = {}
for r in data["results"]:
    if r["suite"] != "launch" or r["metric"] not in ("gpu_time_per_node", "host_time_per_node"):
        continue
    rows.setdefault((r["case"], r["metric"]), []).append(
        (r["axes"]["N"], r["median"] / 1e3, r["min"] / 1e3, r["max"] / 1e3))
for (case, metric), pts in rows.items():
    with open(f"{out}/{case}.{metric}.dat", "w") as f:
        for p in sorted(pts):
            f.write("%d %g %g %g\n" % p)
m = data["machine"]
open(f"{out}/title", "w").write("%s, driver %s" % (m.get("gpu_name", "no GPU"), m.get("driver_version", "?")))
PY
title=$(cat "$tmp/title")
plots=()
for metric in gpu_time_per_node host_time_per_node; do
  for f in "$tmp"/*."$metric".dat; do
    [ -e "$f" ] || continue
    case=$(basename "$f" ."$metric".dat)
    plots+=("'$f' using 1:2:3:4 with yerrorlines title '$case'")
  done
  printf '%s\n' "${plots[@]}" | paste -sd, > "$tmp/$metric.plots"
  plots=()
done
gnuplot <<GP
set terminal pngcairo size 1200,480 font ",10" noenhanced
set output '$png'
set multiplot layout 1,2 title "chain of N empty kernels, $title (median, min-max bars)"
set logscale x
set logscale y
set xlabel "N (kernels per submission)"
set key top right
set grid
set ylabel "GPU time per node (us)"
plot $(cat "$tmp/gpu_time_per_node.plots")
set ylabel "host time per node (us)"
plot $(cat "$tmp/host_time_per_node.plots")
unset multiplot
GP
echo "wrote $png"
