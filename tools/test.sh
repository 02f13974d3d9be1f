#!/usr/bin/env bash
# The test command (README, .ci/run): configure, build, run every test
# through ctest, plain and ASan+UBSan. GPU tests skip with a reason here.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -DKDAG_BUILD_TESTS=ON -DKDAG_SANITIZED_TESTS=ON
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure
