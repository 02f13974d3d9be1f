#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails when a kd_raw_launch call in examples/, tests/ or bench/ is not preceded,
# within the 12 lines above it, by a "SAFETY:" comment (the seed's rule:
# every launch states ABI, order, bounds, aliasing, initialisation, lifetime).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
status=0
count=0
while IFS= read -r file; do
  out=$(awk -v f="$file" '
    /SAFETY:/ { last = NR }
    /kd_raw_launch\(/ && !/^[[:space:]]*(\/\*|\*|\/\/)/ && !/kd_status kd_raw_launch/ {
      n++
      if (!last || NR - last > 12) { printf "%s:%d: kd_raw_launch without a SAFETY comment above it\n", f, NR; bad++ }
    }
    END { printf "#%d %d\n", n, bad }' "$file")
  echo "$out" | grep -v '^#' || true
  read -r calls bad <<<"$(echo "$out" | grep '^#' | tr -d '#')"
  count=$((count + calls))
  [ "$bad" -eq 0 ] || status=1
done < <(find "$root/examples" "$root/tests" "$root/bench" -name '*.c' | sort)
echo "checked $count kd_raw_launch calls"
[ "$count" -gt 0 ] || { echo "no kd_raw_launch calls found: wrong root?"; exit 1; }
exit $status
