#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fuzzes kdag's parsers and graph API (tests/fuzz/) with libFuzzer, then
# merges what found new coverage into the committed corpus, which
# host_fuzz_test replays in every build.
#
#   tools/fuzz.sh [SECONDS [TARGET...]]    default: 120 s each, targets ptx image graph cuda raw
#
# Needs clang (its libFuzzer). Builds in build-fuzz/. New inputs go to
# build-fuzz/fuzz-new/<target>/, crashes to build-fuzz/fuzz-crashes/<target>/
# (each a reproducer: build-fuzz/tests/fuzz_<target> FILE; KDF_TRACE=1
# narrates a graph input). Exit status 1 when a target crashed or broke a
# property. Both cores: one target after another, each on one process, so
# a run of several targets takes SECONDS each.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
seconds="${1:-120}"
shift || true
if [ $# -gt 0 ]; then targets=("$@"); else targets=(ptx image graph cuda raw); fi
CC=clang cmake -S . -B build-fuzz -DKDAG_FUZZERS=ON -DKDAG_SANITIZED_TESTS=OFF -DKDAG_TSAN_TESTS=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
failed=0
for t in "${targets[@]}"; do
  new="build-fuzz/fuzz-new/$t" crashes="build-fuzz/fuzz-crashes/$t" corpus="tests/fuzz/corpus/$t"
  mkdir -p "$new" "$crashes"
  echo "== fuzz_$t for ${seconds} s"
  if ! "build-fuzz/tests/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
       -artifact_prefix="$crashes/" "$new" "$corpus" >"build-fuzz/fuzz-$t.log" 2>&1; then
    failed=1
    grep -E 'property broken|ERROR:|runtime error' "build-fuzz/fuzz-$t.log" | head -5 || true
    echo "fuzz_$t failed: see build-fuzz/fuzz-$t.log and $crashes/"
  fi
  # Only inputs that reach new edges join the committed corpus (not new hit
  # counts, which would add thousands of files).
  "build-fuzz/tests/fuzz_$t" -merge=1 -use_counters=0 "$corpus" "$new" >>"build-fuzz/fuzz-$t.log" 2>&1
  grep -E '^(stat::number_of_executed_units|MERGE-OUTER: [0-9]+ new files)' "build-fuzz/fuzz-$t.log" || true
done
exit "$failed"
