#!/bin/sh
# Runs a command and passes only if it exits 0 AND its output contains a
# text: ctest's PASS_REGULAR_EXPRESSION alone ignores the exit status, so a
# program that printed its verdict and then crashed, leaked under a
# sanitizer's exitcode, or failed a later check would still pass.
#   tools/expect-output.sh TEXT COMMAND [ARGS...]
text=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then
  echo "expect-output: '$1' exited with status $rc" >&2
  exit 1
fi
case $out in
*"$text"*) exit 0 ;;
esac
echo "expect-output: the output lacks \"$text\"" >&2
exit 1
