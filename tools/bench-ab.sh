#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Interleaved A/B of two revisions through kdag-bench, for changes a single
# run cannot settle on a noisy machine (the 2-core build machine, the H200's
# VM host): each revision is built once (Release) in a worktree, then the two
# kdag-bench binaries run in turn, ROUNDS times, and every round's --compare
# rows are printed, so the spread of a change shows beside its size.
#
#   tools/bench-ab.sh OLD_REV NEW_REV [ROUNDS] [kdag-bench selection...]
#   tools/bench-ab.sh b7d5ebb HEAD 6 --suite graph --case declare
#
# Revisions are commits: uncommitted changes are not measured (commit them
# on a branch first). The two sides take turns going first, so neither
# always runs on a machine the other has warmed. Worktrees, builds, results
# and each run's log go under $KDAG_AB_DIR (default /tmp/kdag-ab); this
# checkout's MathDx (third_party/mathdx) is linked into both worktrees. CPU
# suites run anywhere; a GPU suite needs the device machine, where the two
# build trees would have to travel (tools/gpu-lane.sh carries one), or runs
# here against the null driver to measure kdag's own host work (not GPU
# figures): KDAG_CUDA_DRIVER_PATH=$PWD/build/tests/libkdag_null_driver.so
# tools/bench-ab.sh OLD NEW 3 --suite launch,rebind (both sides load the same
# driver, built from this checkout). Both
# revisions need kdag-bench's --json and --compare (from 69f1449 on).
#
# The two halves run apart for the GPU lane: KDAG_AB_BUILD_ONLY=1 builds
# and stops (tools/gpu-lane.sh bundle carries the two kdag-bench binaries),
# KDAG_AB_PREBUILT=1 runs binaries already at
# $KDAG_AB_DIR/{old,new}/build/bench/kdag-bench (OLD_REV and NEW_REV then
# only label them).
set -euo pipefail
usage="usage: $0 OLD_REV NEW_REV [ROUNDS] [kdag-bench selection...]"
old=${1:?$usage}
new=${2:?$usage}
shift 2
rounds=6
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  rounds=$1
  shift
fi
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${KDAG_AB_DIR:-/tmp/kdag-ab}
mkdir -p "$dir"
# Revisions that look in the configured MathDx folder (not the worktree's
# third_party/) find this checkout's through the environment.
if [ -z "${KDAG_MATHDX_DIR:-}" ] && [ -d "$here/third_party/mathdx" ]; then
  export KDAG_MATHDX_DIR="$here/third_party/mathdx"
fi

build() { # REV NAME: a detached worktree of REV at $dir/NAME, kdag-bench built in it
  local src="$dir/$2"
  git -C "$here" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
  git -C "$here" worktree add --detach "$src" "$1" >/dev/null
  if [ -d "$here/third_party/mathdx" ]; then mkdir -p "$src/third_party" && ln -s "$here/third_party/mathdx" "$src/third_party/mathdx"; fi
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DKDAG_BUILD_TESTS=OFF >/dev/null
  cmake --build "$src/build" -j"$(nproc)" --target kdag-bench >/dev/null
  git -C "$src" log --oneline -1 > "$src/build/REV"
  echo "$2: $(cat "$src/build/REV")"
}
if [ "${KDAG_AB_PREBUILT:-0}" = 1 ]; then
  for side in old new; do
    [ -x "$dir/$side/build/bench/kdag-bench" ] || { echo "$0: no $dir/$side/build/bench/kdag-bench" >&2; exit 2; }
    echo "$side: $(cat "$dir/$side/build/REV" 2>/dev/null || echo "(unlabelled)")"
  done
else
  build "$old" old
  build "$new" new
fi
[ "${KDAG_AB_BUILD_ONLY:-0}" = 1 ] && exit 0

run() { # SIDE ROUND
  if ! "$dir/$1/build/bench/kdag-bench" --json "$dir/$1-$2.json" "${selection[@]}" >"$dir/$1-$2.md" 2>"$dir/$1-$2.log"; then
    echo "round $2: kdag-bench ($1) failed; its log: $dir/$1-$2.log" >&2
    tail -5 "$dir/$1-$2.log" >&2
    exit 1
  fi
}
selection=("$@")
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then run old "$r"; run new "$r"; else run new "$r"; run old "$r"; fi
  "$dir/new/build/bench/kdag-bench" --compare "$dir/old-$r.json" "$dir/new-$r.json" >"$dir/compare-$r.md"
  { grep '^| [a-z]' "$dir/compare-$r.md" | grep -v '^| suite ' || echo "| (no rows in common) |"; } | sed "s/^/round $r /"
done
