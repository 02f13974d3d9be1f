#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU lane in one script.
#
#   tools/gpu-lane.sh bundle   (here, no GPU needed)
#       Builds build-gpu/ and copies the shared libraries the H200 machine
#       lacks (Criterion and its dependencies, Concurrency Kit, hwloc, the
#       sanitizer runtimes this compiler links against) into
#       build-gpu/carry-lib.tar.xz (a third of their 21 MB). Nothing is
#       ever unpacked into /.
#
#   tools/gpu-lane.sh run      (on the H200, through the device tool)
#       Runs every test with KDAG_REQUIRE_GPU=1 (a skip is a failure), the
#       example, compute-sanitizer memcheck over the GPU tests, and the
#       benchmarks when they exist; logs go to $OUT.
#
# The device call, made from this checkout:
#   run(command="bash tools/gpu-lane.sh run", carry=["build-gpu"])
#
# An interleaved A/B of two commits on the GPU (tools/bench-ab.sh, whose
# Release builds both sides): KDAG_LANE_AB="OLD_REV NEW_REV" at bundle
# carries the two kdag-bench binaries (2.4 MB), and run then alternates
# them KDAG_LANE_AB_ROUNDS times (default 4) over KDAG_LANE_AB_ARGS
# (default "--suite rebind"), after the tests and before the benchmarks;
# the rounds' tables come back as ab.tar, the per-round comparison in the
# output.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=build-gpu

bundle() {
  cd "$here"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKDAG_BUILD_TESTS=ON -DKDAG_TSAN_TESTS=OFF >/dev/null  # TSan runs on the host lane; its runtime would not fit the carry limit
  cmake --build "$build" -j"$(nproc)"
  rm -rf "$build/carry-lib"
  mkdir -p "$build/carry-lib"
  # glibc, libstdc++ and libgcc_s are newer there; everything else travels,
  # but for libkdag itself, which the binaries find in $build by their RPATH.
  local skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libstdc\+\+|libgcc_s|libkdag\.so)'
  for bin in "$build"/tests/*_test "$build"/tests/*_test_asan "$build"/examples/* "$build"/bench/kdag-bench; do
    [ -f "$bin" ] && [ -x "$bin" ] || continue
    ldd "$bin" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      [[ $name =~ $skip ]] && continue
      cp -Lu "$path" "$build/carry-lib/$name"
    done
  done
  # The device tool carries at most 64 MiB: drop what only linking needs
  # (objects, static archives) and the debug info of the binaries. The next
  # bundle rebuilds them.
  find "$build" \( -name '*.o' -o -name '*.a' \) -delete
  # With the objects gone their dependency records are moot too (2.6 MB):
  # the next bundle rebuilds every object and records them again.
  find "$build" -path '*/CMakeFiles/*' \( -name '*.d' -o -name 'compiler_depend.internal' \) -delete
  find "$build" -path '*/CMakeFiles/*' -name 'compiler_depend.make' -exec sh -c ': > "$1"' sh {} \;
  # The host suites under ASan need no GPU: the host lane (CI) runs them,
  # and leaving them out keeps the carry under its limit.
  rm -f "$build"/tests/host_*_test_asan
  find "$build/kernels" -maxdepth 1 -name '*.c' -delete
  find "$build/tests" "$build/bench" "$build/examples" -maxdepth 1 -type f -perm -u+x -exec strip --strip-debug {} +
  strip --strip-debug "$build"/libkdag.so.*.*.*  # keeps the dynamic symbols abi_exports reads
  # MathDx (git-ignored, from PyPI) travels trimmed and compressed: the
  # cuBLASDx, cuSOLVERDx and commonDx headers, CUTLASS, libmathdx and the
  # wheels' manifests (the cache key hashes them).
  local mdx=third_party/mathdx
  if [ -f "$mdx/nvidia/mathdx/include/cublasdx.hpp" ]; then
    tar -C "$mdx" -cJf "$build/mathdx.tar.xz" --exclude='nvidia/mathdx/include/cufftdx*' \
      --exclude='nvidia/mathdx/include/curanddx*' --exclude='nvidia/mathdx/include/nvcompdx*' \
      nvidia $(cd "$mdx" && ls -d nvidia_mathdx-*.dist-info nvidia_libmathdx_cu13-*.dist-info)
  fi
  rm -rf "$build/ab"
  if [ -n "${KDAG_LANE_AB:-}" ]; then
    local ab=/tmp/kdag-lane-ab
    # shellcheck disable=SC2086
    KDAG_AB_BUILD_ONLY=1 KDAG_AB_DIR=$ab bash tools/bench-ab.sh $KDAG_LANE_AB
    for side in old new; do
      mkdir -p "$build/ab/$side/build/bench"
      cp "$ab/$side/build/REV" "$build/ab/$side/build/"
      strip --strip-debug -o "$build/ab/$side/build/bench/kdag-bench" "$ab/$side/build/bench/kdag-bench"
    done
  fi
  # The test binaries (half the bundle, each carrying the embedded kernels)
  # travel compressed too; run unpacks them in place.
  rm -f "$build/tests-bin.tar.xz"
  (cd "$build" && XZ_OPT=-T0 tar -cJf tests-bin.tar.xz --remove-files $(ls tests/*_test tests/*_test_asan 2>/dev/null))
  # The build tree records its absolute path; the run step recreates it.
  echo "$here" > "$build/source-dir"
  # The libraries travel compressed, like MathDx: the carry limit is 64 MiB
  # with the tree, and they are a third of the bundle uncompressed.
  rm -f "$build/carry-lib.tar.xz"
  XZ_OPT=-T0 tar -C "$build" -cJf "$build/carry-lib.tar.xz" carry-lib
  du -sh "$build/carry-lib" "$build/carry-lib.tar.xz"
  rm -rf "$build/carry-lib"
  du -sh "$build"
}

run() {
  cd "$here"
  local out=${OUT:-/tmp/kdag-gpu-out}
  mkdir -p "$out"
  local src
  src=$(cat "$build/source-dir")
  # ctest and the tests use the absolute paths of the build machine.
  if [ "$src" != "$here" ] && [ ! -e "$src" ]; then
    mkdir -p "$(dirname "$src")"
    ln -s "$here" "$src"
  fi
  # The Python tests name the build machine's interpreter: here they run
  # under the machine's own python3 (the one with PyTorch, CuPy and NumPy),
  # even where a python3 of that path exists without them.
  local py
  py=$(sed -n 's/^_*Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  if [ -n "$py" ] && command -v python3 >/dev/null && [ "$py" != "$(command -v python3)" ]; then
    sed -i "s|\"$py\"|\"$(command -v python3)\"|g" "$build/tests/CTestTestfile.cmake"
  fi
  local libs="$here/$build/carry-lib" # a bundle from before the libraries were compressed
  if [ -f "$build/carry-lib.tar.xz" ]; then
    rm -rf /tmp/kdag-carry # a warm machine may hold an older bundle's libraries
    mkdir -p /tmp/kdag-carry && tar -C /tmp/kdag-carry -xJf "$build/carry-lib.tar.xz"
    libs=/tmp/kdag-carry/carry-lib
  fi
  [ -f "$build/tests-bin.tar.xz" ] && tar -C "$build" -xJf "$build/tests-bin.tar.xz"
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export KDAG_REQUIRE_GPU=1
  # NCCL for the collective nodes: the machine's pip wheel (PyTorch's), which
  # kdag finds under KDAG_PYTHON_SITE (nvidia/nccl/lib/libnccl.so.2).
  if [ -z "${KDAG_PYTHON_SITE:-}" ] && command -v python3 >/dev/null; then
    KDAG_PYTHON_SITE=$(python3 -c 'import site; print(":".join(site.getsitepackages()))' 2>/dev/null || true)
    export KDAG_PYTHON_SITE
  fi
  local site
  for site in ${KDAG_PYTHON_SITE//:/ }; do ls "$site"/nvidia/nccl/lib/libnccl.so.2 2>/dev/null || true; done
  if [ -f "$build/mathdx.tar.xz" ]; then
    # Where the tests look (ctest points them at the checkout's third_party).
    export KDAG_MATHDX_DIR=$here/third_party/mathdx
    mkdir -p "$KDAG_MATHDX_DIR" && tar -C "$KDAG_MATHDX_DIR" -xJf "$build/mathdx.tar.xz"
  fi
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
  ldconfig -p | grep -E "libnvrtc.so.13 |libnvJitLink.so.13 " || true
  local rc=0
  set +e
  # KDAG_LANE_PROBES=0 leaves out the two probes (a short run).
  if [ "${KDAG_LANE_PROBES:-1}" = 1 ]; then
  # What a sticky fault leaves usable in one process, route by route.
  "$build/kdag-fault-probe" > "$out/fault-probe.log" 2>&1
  cat "$out/fault-probe.log"
  # Which driver calls wait for unrelated work in the context (what kdag
  # defers or documents as a wait: kdag/session.h, "Waits").
  "$build/kdag-wait-probe" > "$out/wait-probe.log" 2>&1
  cat "$out/wait-probe.log"
  fi
  # KDAG_LANE_TESTS=0: benchmarks only (a diagnostic run).
  if [ "${KDAG_LANE_TESTS:-1}" = 1 ]; then
  # KDAG_LANE_TESTS_REGEX: only the ctest tests it matches (ctest -R), and
  # no examples (a rerun of one suite after a change to it).
  local only=()
  [ -n "${KDAG_LANE_TESTS_REGEX:-}" ] && only=(-R "$KDAG_LANE_TESTS_REGEX")
  (cd "$src" && ctest --test-dir "$build" -V --timeout 300 -E '^(host_.*_test_asan|api_docs)$' -LE 'long|downstream' "${only[@]}") > "$out/ctest.log" 2>&1
  rc=$?
  grep -E "tests passed|Test +#" "$out/ctest.log"
  grep -E "Synthesis|SKIP|witness|pipeline|submissions|hidden wait" "$out/ctest.log" | head -80
  if [ -z "${KDAG_LANE_TESTS_REGEX:-}" ]; then
    "$build/examples/add"
    "$build/examples/dx_gemm"
    "$build/examples/dx_cholesky"
    (cd "$out" && "$here/$build/examples/pipeline")
  fi
  # KDAG_LANE_MEMCHECK=0 leaves memcheck out (a rerun of code it passed).
  if [ "${KDAG_LANE_MEMCHECK:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    # The deliberate trap tests are left out: memcheck reports the trap. So
    # are the tests that time waits behind a spinning kernel: under the
    # sanitizer a first launch waits for the context (tests that take
    # KDAG_TEST_UNTIMED=1 keep their ordering checks and drop the timing).
    # API-error reports are off: kdag counts a kernel's parameters by probing
    # cuFuncGetParamInfo until it reports an invalid index, on purpose.
    local mc=0
    # KDAG_LANE_MEMCHECK_TESTS: fewer of them (a rerun of one).
    for t in ${KDAG_LANE_MEMCHECK_TESTS:-gpu_raw_test gpu_graph_test gpu_graph_mode_test gpu_executors_test gpu_interop_test gpu_comm_test}; do
      KDAG_TEST_UNTIMED=1 compute-sanitizer --tool memcheck --target-processes all --leak-check full --error-exitcode 7 \
        --report-api-errors no "$build/tests/$t" --jobs 1 \
        --filter '!(*fault*|*spinning*)' >> "$out/memcheck.log" 2>&1 || mc=1
    done
    grep -E "ERROR SUMMARY|LEAK SUMMARY|Synthesis" "$out/memcheck.log"
    echo "compute-sanitizer memcheck exit: $mc"
    [ $mc -eq 0 ] || rc=1
  fi
  fi
  if [ -d "$build/ab" ] && [ "${KDAG_LANE_AB_ROUNDS:-4}" != 0 ]; then
    rm -rf /tmp/kdag-lane-ab && cp -r "$build/ab" /tmp/kdag-lane-ab
    # shellcheck disable=SC2086
    KDAG_AB_PREBUILT=1 KDAG_AB_DIR=/tmp/kdag-lane-ab bash tools/bench-ab.sh old new "${KDAG_LANE_AB_ROUNDS:-4}" \
      ${KDAG_LANE_AB_ARGS:---suite rebind} 2>&1 | tee "$out/ab.log"
    (cd /tmp/kdag-lane-ab && tar -cf "$out/ab.tar" ./*.md ./*.json ./*.log) || echo "gpu-lane: could not archive the A/B"
  fi
  # KDAG_LANE_BENCH=0: tests only. KDAG_LANE_BENCH_ARGS: extra arguments
  # for the batch-mode pass (for example "--suite dx"). KDAG_LANE_COLD=0
  # leaves out the cold-mode pass (launch and pipeline, L2 flushed).
  if [ "${KDAG_LANE_BENCH:-1}" = 1 ] && [ -x "$build/bench/kdag-bench" ]; then
    # shellcheck disable=SC2086
    # --rounds 16: the cases of a point take turns, so the machine's drift
    # falls on baseline and case alike. With 4 turns, host time per launch
    # of identical work (the launch suite's copies) still differed by up to
    # 1.4x between cases on the H200's VM; with 16, by 1.06x (2026-12-03).
    "$build/bench/kdag-bench" --rounds 16 ${KDAG_LANE_BENCH_ARGS:-} --json "$out/bench.json" --csv "$out/bench.csv" \
      > "$out/bench.md" 2>"$out/bench.stderr"
    echo "kdag-bench exit: $? ($(grep -c '^|' "$out/bench.md") table rows in bench.md)"
    grep -E "mean per start|kdag-bench oneshot" "$out/bench.stderr" || true
    if [ "${KDAG_LANE_COLD:-1}" = 1 ]; then
      "$build/bench/kdag-bench" --rounds 4 --mode cold --suite launch,pipeline,copy --json "$out/bench-cold.json" \
        --csv "$out/bench-cold.csv" > "$out/bench-cold.md" 2>"$out/bench-cold.stderr"
      echo "kdag-bench --mode cold exit: $?"
    fi
  fi
  set -e
  # The test verdict last, where the reply's output tail shows it.
  if [ -f "$out/ctest.log" ]; then
    grep -E "^\[----\].*(FAIL|Assert|assert|crash)|Failed|Exception|SegFault|Timeout" "$out/ctest.log" | head -40 || true
    sed -n '/tests passed/,$p' "$out/ctest.log"
  fi
  # The device tool returns at most 8 files: the bench tables stay as they
  # are (6), the logs travel as one archive.
  (cd "$out" && tar -cf logs.tar --remove-files $(ls ctest.log memcheck.log fault-probe.log wait-probe.log pipeline.dot ab.log ./*.stderr 2>/dev/null)) || echo "gpu-lane: could not archive the logs"
  echo "gpu-lane: ctest exit $rc"
  return $rc
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *) echo "usage: $0 bundle|run" >&2; exit 2 ;;
esac
