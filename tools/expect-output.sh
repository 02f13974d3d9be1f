#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a command and passes only if it exits 0 AND its output contains a
# text: ctest's PASS_REGULAR_EXPRESSION alone ignores the exit status, so a
# program that printed its verdict and then crashed, leaked under a
# sanitizer's exitcode, or failed a later check would still pass. The
# output streams through as it comes (a test killed by ctest's timeout
# still shows what it printed).
#   tools/expect-output.sh TEXT COMMAND [ARGS...]
text=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo "expect-output: '$1' exited with status $rc" >&2
  exit 1
fi
if grep -qF -- "$text" "$log"; then
  exit 0
fi
echo "expect-output: the output lacks \"$text\"" >&2
exit 1
