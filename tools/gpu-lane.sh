#!/usr/bin/env bash
# The GPU lane in one script.
#
#   tools/gpu-lane.sh bundle   (here, no GPU needed)
#       Builds build-gpu/ and copies the shared libraries the H200 machine
#       lacks (Criterion and its dependencies, Concurrency Kit, hwloc, the
#       sanitizer runtimes this compiler links against) into
#       build-gpu/carry-lib. Nothing is ever unpacked into /.
#
#   tools/gpu-lane.sh run      (on the H200, through the device tool)
#       Runs every test with KDAG_REQUIRE_GPU=1 (a skip is a failure), the
#       example, compute-sanitizer memcheck over the GPU tests, and the
#       benchmarks when they exist; logs go to $OUT.
#
# The device call, made from this checkout:
#   run(command="bash tools/gpu-lane.sh run", carry=["build-gpu"])
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=build-gpu

bundle() {
  cd "$here"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKDAG_BUILD_TESTS=ON >/dev/null
  cmake --build "$build" -j"$(nproc)"
  rm -rf "$build/carry-lib"
  mkdir -p "$build/carry-lib"
  # glibc, libstdc++ and libgcc_s are newer there; everything else travels.
  local skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libstdc\+\+|libgcc_s)'
  for bin in "$build"/tests/*_test "$build"/tests/*_test_asan "$build"/examples/add "$build"/bench/kdag-bench; do
    [ -x "$bin" ] || continue
    ldd "$bin" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      [[ $name =~ $skip ]] && continue
      cp -Lu "$path" "$build/carry-lib/$name"
    done
  done
  # The build tree records its absolute path; the run step recreates it.
  echo "$here" > "$build/source-dir"
  du -sh "$build" "$build/carry-lib"
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
  export LD_LIBRARY_PATH="$here/$build/carry-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export KDAG_REQUIRE_GPU=1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt" || true
  local rc=0
  set +e
  (cd "$src" && ctest --test-dir "$build" --output-on-failure --timeout 300) 2>&1 | tee "$out/ctest.log"
  rc=${PIPESTATUS[0]}
  for t in "$build"/tests/*_test; do
    "$t" --jobs 1 2>&1 | grep -E "Synthesis|FAIL|SKIP" | sed "s|^|$(basename "$t"): |"
  done | tee "$out/criterion-summary.txt"
  "$build/examples/add" 2>&1 | tee "$out/example-add.txt"
  if command -v compute-sanitizer >/dev/null; then
    # The deliberate trap test is left out: memcheck reports the trap.
    # API-error reports are off: kdag counts a kernel's parameters by probing
    # cuFuncGetParamInfo until it reports an invalid index, on purpose.
    compute-sanitizer --tool memcheck --target-processes all --leak-check full --error-exitcode 7 \
      --report-api-errors no \
      "$build/tests/gpu_raw_test" --jobs 1 --filter '!(gpu_raw/device_fault*)' > "$out/memcheck.log" 2>&1
    local mc=$?
    tail -5 "$out/memcheck.log"
    echo "compute-sanitizer memcheck exit: $mc"
    [ $mc -eq 0 ] || rc=1
  fi
  if [ -x "$build/bench/kdag-bench" ]; then
    "$build/bench/kdag-bench" --json "$out/bench.json" 2>"$out/bench.stderr" | tee "$out/bench.md"
  fi
  set -e
  echo "gpu-lane: ctest exit $rc"
  return $rc
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *) echo "usage: $0 bundle|run" >&2; exit 2 ;;
esac
