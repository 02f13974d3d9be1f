#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The downstream test (ctest downstream): uses kdag as another project
# would, from the tree `cmake --install` writes and from the source.
#   tests/downstream/run.sh SOURCE_DIR BUILD_DIR WORK_DIR
# 1. installs BUILD_DIR, then moves the installed tree (a package must work
#    from any prefix) and checks its layout: no build-tree path in the
#    libraries, no test or bench kernels, kdag-bench runs;
# 2. find_package(kdag): the first program against kdag::kdag and
#    kdag::kdag_static, and every public header from C++17 with -pedantic;
# 3. pkg-config: the first program linked shared, and statically with
#    --static's flags;
# 4. add_subdirectory and FetchContent: kdag built inside the project,
#    which must not need Criterion or jansson;
# 5. pip install SOURCE_DIR/python into a fresh virtual environment (the
#    build backend comes from PyPI), then the package's HOST tests against
#    the installed package, from outside the checkout.
set -euo pipefail
src=$(cd "${1:?usage: $0 SOURCE_DIR BUILD_DIR WORK_DIR}" && pwd)
build=$(cd "${2:?usage}" && pwd)
work=${3:?usage}
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
fail() { echo "downstream: $*" >&2; exit 1; }
step() { echo "== $* ($(( $(date +%s) - t0 )) s)"; }
t0=$(date +%s)
expect="sum = 1000000 (expected 1000000)"
run_first() { # EXE: runs the first program and checks its verdict
  local out
  out=$("$1") || fail "$1 exited with $?: $out"
  [[ $out == *"$expect"* ]] || fail "$1 printed '$out', not '$expect'"
  echo "$(basename "$1"): $out"
}

step "install"
cmake --install "$build" --prefix "$work/staged" > "$work/install.log"
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
libdir=$(dirname "$(find "$prefix" -name libkdag.a | head -1)")
[ -f "$libdir/libkdag.a" ] || fail "no libkdag.a installed"
for f in include/kdag/kdag.h include/kdag/version.h "${libdir#"$prefix"/}/pkgconfig/kdag.pc" \
         "${libdir#"$prefix"/}/cmake/kdag/kdagConfig.cmake" "${libdir#"$prefix"/}/cmake/kdag/kdagConfigVersion.cmake" \
         share/doc/kdag/README.md share/doc/kdag/LICENSE bin/kdag-bench bin/kdag; do
  [ -e "$prefix/$f" ] || fail "the install lacks $f"
done
soname=$(readelf -d "$libdir/libkdag.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
echo "SONAME $soname"
[[ $soname =~ ^libkdag\.so\.[0-9]+(\.[0-9]+)?$ ]] || fail "unexpected SONAME '$soname'"
ls "$libdir" | grep -q kernels && fail "a kernels archive was installed: $(ls "$libdir")"
if nm -A "$libdir/libkdag.a" "$libdir/libkdag.so" 2>/dev/null | grep -E 'kd_kernel_(test|bench|add)_'; then
  fail "the installed libraries carry test or bench kernels"
fi
for lib in "$libdir"/libkdag.so.* "$libdir/libkdag.a"; do
  [ -L "$lib" ] && continue
  if strings -a "$lib" | grep -F -e "$src" -e "$build"; then
    fail "$lib names the source or build folder"
  fi
done
suites=$("$prefix/bin/kdag-bench" --list) || fail "the installed kdag-bench --list exited with $?"
[[ $suites == *"graph [CPU]"* ]] || fail "the installed kdag-bench does not list its suites"

step "find_package"
cmake -S "$src/tests/downstream" -B "$work/package" -DCMAKE_PREFIX_PATH="$prefix" \
  -DKDAG_SOURCE="$src" > "$work/package.log"
cmake --build "$work/package" -j2 >> "$work/package.log"
run_first "$work/package/first_shared"
run_first "$work/package/first_static"
ldd "$work/package/first_static" | grep -q libkdag && fail "first_static links libkdag.so"
"$work/package/cxx17"

step "pkg-config"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[ "$(pkg-config --modversion kdag)" = "$(sed -n 's/^#define KD_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$src/include/kdag/version.h" | paste -sd.)" ] ||
  fail "kdag.pc's version differs from kdag/version.h"
flags=(-std=c11 -Wall -Wextra -pedantic -Werror)
# shellcheck disable=SC2046
cc "${flags[@]}" "$src/examples/first.c" $(pkg-config --cflags --libs kdag) -Wl,-rpath,"$libdir" -o "$work/pc_shared"
run_first "$work/pc_shared"
# A static link: the archive, then everything --static names but -lkdag.
# shellcheck disable=SC2046
cc "${flags[@]}" "$src/examples/first.c" $(pkg-config --cflags kdag) "$libdir/libkdag.a" \
  $(pkg-config --static --libs kdag | sed 's/-lkdag\b//') -o "$work/pc_static"
run_first "$work/pc_static"

for from in subdirectory fetchcontent; do
  step "$from"
  cmake -S "$src/tests/downstream" -B "$work/$from" -DKDAG_FROM=$from \
    -DKDAG_SOURCE="$src" > "$work/$from.log"
  if grep -E '^(CRITERION|JANSSON)_FOUND' "$work/$from/CMakeCache.txt"; then
    fail "kdag by $from looked for Criterion or jansson"
  fi
  find "$work/$from" -path '*/tests/CTestTestfile.cmake' | grep -q . && fail "kdag by $from configured its tests"
  cmake --build "$work/$from" -j2 >> "$work/$from.log"
  run_first "$work/$from/first_shared"
  run_first "$work/$from/first_static"
  "$work/$from/cxx17"
done
step "pip install python/"
python3 -m venv "$work/venv" > "$work/venv.log" 2>&1 || fail "python3 -m venv failed: $(tail -3 "$work/venv.log")"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$src/python" numpy pytest > "$work/pip.log" 2>&1 ||
  fail "pip install python/ failed: $(tail -20 "$work/pip.log")"
(cd "$work" && "$work/venv/bin/python" -m pytest -q --noconftest -p no:cacheprovider "$src/python/tests/test_host.py") ||
  fail "the installed package's tests failed"
step "downstream: passed"
