#!/usr/bin/env bash
# The shared library exports exactly the functions its public headers mark
# KD_API: nothing internal leaks into the ABI, and no declared function is
# missing from it.
#   tools/check-exports.sh build/libkdag.so include/kdag
set -euo pipefail
lib=${1:?usage: $0 LIBKDAG.so INCLUDE_DIR}
inc=${2:?usage: $0 LIBKDAG.so INCLUDE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u > "$tmp/exported"
grep -h '^KD_API' "$inc"/*.h | grep -oE '\bkd_[a-z0-9_]+\(' | tr -d '(' | sort -u > "$tmp/declared"
status=0
if ! [ -s "$tmp/declared" ]; then
  echo "check-exports: no KD_API declarations found in $inc" >&2
  exit 1
fi
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
[ $status -eq 0 ] && echo "check-exports: $(wc -l < "$tmp/declared") KD_API functions, exactly what $lib exports"
exit $status
