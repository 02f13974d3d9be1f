#!/usr/bin/env bash
# Interleaved A/B of two revisions through kdag-bench, for changes a single
# run cannot settle on a noisy machine (the 2-core build machine, the H200's
# VM host): each revision is built once (Release) in a worktree, then the two
# kdag-bench binaries run in turn, ROUNDS times, and every round's --compare
# rows are printed, so the spread of a change shows beside its size.
#
#   tools/bench-ab.sh OLD_REV NEW_REV [ROUNDS] [kdag-bench selection...]
#   tools/bench-ab.sh b7d5ebb HEAD 6 --suite graph --case declare
#
# Worktrees, builds and results go under $KDAG_AB_DIR (default
# /tmp/kdag-ab). CPU suites run anywhere; a GPU suite needs the device
# machine, where the two build trees would have to travel (tools/gpu-lane.sh
# carries one).
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

build() { # REV NAME: a detached worktree of REV at $dir/NAME, kdag-bench built in it
  local src="$dir/$2"
  git -C "$here" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
  git -C "$here" worktree add --detach "$src" "$1" >/dev/null
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DKDAG_BUILD_TESTS=OFF >/dev/null
  cmake --build "$src/build" -j"$(nproc)" --target kdag-bench >/dev/null
  echo "$2: $(git -C "$src" log --oneline -1)"
}
build "$old" old
build "$new" new

for r in $(seq "$rounds"); do
  for side in old new; do
    "$dir/$side/build/bench/kdag-bench" --quiet --json "$dir/$side-$r.json" "$@" >/dev/null
  done
  "$dir/new/build/bench/kdag-bench" --compare "$dir/old-$r.json" "$dir/new-$r.json" |
    grep '^| [a-z]' | grep -v '^| suite ' | sed "s/^/round $r /"
done
