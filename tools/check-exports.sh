#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shared library exports exactly the functions its public headers mark
# KD_API, and every function a public header declares is marked: nothing
# internal leaks into the ABI, no declared function is hidden or missing.
#   tools/check-exports.sh build/libkdag.so include/kdag
# Public prototypes start at the beginning of a line, as the headers write
# them ("KD_API kd_status kd_foo(...").
set -euo pipefail
export LC_ALL=C
lib=${1:?usage: $0 LIBKDAG.so INCLUDE_DIR}
inc=${2:?usage: $0 LIBKDAG.so INCLUDE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Every defined dynamic symbol but absolute ones (version nodes).
nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sort -u > "$tmp/exported"
{ grep -h '^KD_API' "$inc"/*.h || true; } | grep -oE '\bkd_[a-z0-9_]+\(' | tr -d '(' | sort -u > "$tmp/declared" || true
# A top-level prototype without KD_API: hidden by the build, so the two
# lists above would agree without it.
{ grep -nE '^(const[[:space:]]+)?[A-Za-z_][A-Za-z0-9_]*([[:space:]]+|[[:space:]]*\*+[[:space:]]*)kd_[a-z0-9_]+[[:space:]]*\(' \
    "$inc"/*.h || true; } | { grep -vE ':(static|typedef|KD_API)\b' || true; } > "$tmp/unmarked"
if ! [ -s "$tmp/declared" ]; then
  echo "check-exports: no KD_API declarations found in $inc" >&2
  exit 1
fi
status=0
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
  echo "check-exports: $lib exports symbols no public header declares KD_API:" >&2
  echo "$extra" | sed 's/^/  /' >&2
  status=1
fi
if [ -n "$missing" ]; then
  echo "check-exports: KD_API functions $lib does not export:" >&2
  echo "$missing" | sed 's/^/  /' >&2
  status=1
fi
if [ -s "$tmp/unmarked" ]; then
  echo "check-exports: public prototypes without KD_API:" >&2
  sed 's/^/  /' "$tmp/unmarked" >&2
  status=1
fi
if [ $status -eq 0 ]; then
  echo "check-exports: $(wc -l < "$tmp/declared") KD_API functions, exactly what $lib exports"
fi
exit $status
