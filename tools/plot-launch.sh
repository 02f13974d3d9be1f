#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Plots time per node against N for the launch suite of a kdag-bench JSON
# file (one line per case, GPU and host time side by side), with gnuplot:
# raw loop, hand graph, kdag EAGER and kdag GRAPH (kdag_graph), then any other
# case of the suite. A case without rows (skipped) is named on stderr.
#   tools/plot-launch.sh bench/results/h200/launch.json bench/results/h200/launch.png
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
for case in ("raw_loop", "hand_graph", "kdag_eager", "kdag_graph"):
    if not any(c == case for c, _ in rows):
        print("plot-launch: no launch/%s rows in %s (skipped or not run)" % (case, sys.argv[1]), file=sys.stderr)
m = data["machine"]
open(f"{out}/title", "w").write("%s, driver %s" % (m.get("gpu_name", "no GPU"), m.get("driver_version", "?")))
PY
title=$(cat "$tmp/title")
label() {
  case $1 in
    raw_loop) echo "raw loop (cuLaunchKernel)" ;;
    hand_graph) echo "hand-built CUDA graph" ;;
    kdag_eager) echo "kdag EAGER" ;;
    kdag_graph) echo "kdag GRAPH" ;;
    *) echo "$1" ;;
  esac
}
plots=()
for metric in gpu_time_per_node host_time_per_node; do
  # The four known series first, in this order, then any other case.
  files=()
  for known in raw_loop hand_graph kdag_eager kdag_graph; do
    [ -e "$tmp/$known.$metric.dat" ] && files+=("$tmp/$known.$metric.dat")
  done
  for f in "$tmp"/*."$metric".dat; do
    [ -e "$f" ] || continue
    case $(basename "$f" ."$metric".dat) in raw_loop|hand_graph|kdag_eager|kdag_graph) continue ;; esac
    files+=("$f")
  done
  for f in "${files[@]}"; do
    case=$(basename "$f" ."$metric".dat)
    plots+=("'$f' using 1:2:3:4 with yerrorlines title '$(label "$case")'")
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
