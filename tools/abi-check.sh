#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ABI against the previous release: abidiff (Debian's abigail-tools)
# between the latest release tag's libkdag.so and BUILD_DIR's, over the
# public headers. Release tags are vMAJOR.MINOR.PATCH; with none yet there
# is nothing to compare, and the check says so and passes.
#   tools/abi-check.sh BUILD_DIR
# A release of the same SONAME (same major, and same minor while the major
# is 0) must keep the ABI: any incompatible change fails. Across SONAMEs
# the report is printed for the CHANGELOG and does not fail.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
tag=$(git -C "$here" tag --list 'v[0-9]*.[0-9]*.[0-9]*' --sort=-v:refname | head -1)
if [ -z "$tag" ]; then
  echo "abi-check: no release tag (vX.Y.Z) yet: nothing to compare against"
  exit 0
fi
command -v abidiff >/dev/null || { echo "abi-check: abidiff not found (apt-get install abigail-tools)" >&2; exit 1; }
new_lib=$(readlink -f "$build/libkdag.so")
old=${KDAG_ABI_DIR:-/tmp/kdag-abi}/$tag
if [ ! -f "$old/build/libkdag.so" ]; then
  rm -rf "$old"
  git -C "$here" worktree add --detach --force "$old" "$tag" >/dev/null
  cmake -S "$old" -B "$old/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKDAG_BUILD_TESTS=OFF \
    -DKDAG_BUILD_EXAMPLES=OFF -DKDAG_BUILD_BENCH=OFF >/dev/null
  cmake --build "$old/build" --target kdag -j"$(nproc)" >/dev/null
fi
old_lib=$(readlink -f "$old/build/libkdag.so")
soname() { readelf -d "$1" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p'; }
echo "abi-check: $tag ($(soname "$old_lib")) against $(soname "$new_lib")"
set +e
abidiff --headers-dir1 "$old/include/kdag" --headers-dir2 "$here/include/kdag" "$old_lib" "$new_lib"
rc=$?
set -e
# abidiff's exit status is a bit field: 4 an ABI change, 8 an incompatible one.
if (( rc & 3 )); then echo "abi-check: abidiff failed ($rc)" >&2; exit 1; fi
if (( rc & 8 )); then
  if [ "$(soname "$old_lib")" = "$(soname "$new_lib")" ]; then
    echo "abi-check: an incompatible ABI change under the same SONAME" >&2
    exit 1
  fi
  echo "abi-check: incompatible changes, under a new SONAME (list them in CHANGELOG.md)"
fi
echo "abi-check: done"
