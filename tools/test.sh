#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test command (README, .ci/run): configure, build, run every test
# through ctest, plain and ASan+UBSan. GPU tests skip with a reason here.
# Then everything is built once more as a Release (-O3) build, tests and
# their sanitizer variants included, and its tests run: -O3's inlining
# finds -Wmaybe-uninitialized and truncation cases that -O2 does not,
# -Werror must hold for whoever builds that way, and optimisation must not
# change a result. Last, a Clang build with its tests, and libFuzzer's
# short runs of the fuzz targets (tests/fuzz/; tools/fuzz.sh for long ones).
# Tests labelled long (ctest -L long) stay out: longer random searches.
# The downstream test (an install used by another project, and kdag built
# as its subdirectory) runs in the first tree only.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -DKDAG_BUILD_TESTS=ON -DKDAG_SANITIZED_TESTS=ON
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -LE long
# The ABI against the previous release tag (none yet: it says so).
tools/abi-check.sh build
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DKDAG_BUILD_TESTS=ON -DKDAG_SANITIZED_TESTS=ON
cmake --build build-release -j"$(nproc)"
ctest --test-dir build-release --output-on-failure -LE "long|downstream"
# And with Clang: -Wall -Wextra -Werror hold for both compilers, and the
# tests run once more against its build (sanitizer lanes stay on GCC's),
# with a short fuzzing run of each target (fuzz_*_smoke).
CC=clang cmake -S . -B build-clang -DKDAG_BUILD_TESTS=ON -DKDAG_SANITIZED_TESTS=OFF -DKDAG_TSAN_TESTS=OFF -DKDAG_FUZZERS=ON
cmake --build build-clang -j"$(nproc)"
ctest --test-dir build-clang --output-on-failure -LE "long|downstream"
