#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The layering of src/ (docs/design/layers.md), checked: each layer
# includes only itself and the layers before it,
#   base < compile < cuda < session < graph < exec
# calls the CUDA driver directly (cu->cuXxx through the driver table)
# only in src/cuda/ and the CUDA executors (src/exec/cuda_*.c), and
# bench/ and examples/ use the public headers (bench also cuda.h, the
# driver table, to run on the null driver kdag loads, and kdag's library
# loader, to find its baselines where kdag finds its own libraries, and the
# DLPack layout kdag declares for itself), and the kdag tool (cli/) the
# public headers and kdag's readers of sizes, libraries and binaries. Prints every
# violation as file:line and the rule, and exits 1 if there is one.
#
#   tools/check-layers.sh [repo root]     (ctest: layers)
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
order=(base compile cuda session graph exec)
rank() { # layer -> its place, or -1
  local i
  for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
bad=0
say() { echo "$1: $2"; bad=1; }

for f in src/*/*.[ch]; do
  layer=$(basename "$(dirname "$f")")
  me=$(rank "$layer")
  while IFS=: read -r line inc; do
    target=${inc#*\"}
    target=${target%\"*}
    top=${target%%/*}
    case "$top" in
      kdag)
        case "$layer:$target" in
          base:kdag/status.h | base:kdag/version.h) ;;
          base:*) say "$f:$line" "includes $target: src/base sees no public header but kdag/status.h and kdag/version.h" ;;
          compile:kdag/status.h | compile:kdag/compile.h | compile:kdag/cache.h | compile:kdag/mathdx.h) ;;
          compile:*) say "$f:$line" "includes $target: src/compile is GPU-free, it sees kdag/{status,compile,cache,mathdx}.h only" ;;
        esac
        ;;
      kernels)
        case "$layer:$target" in
          session:kernels/embedded.h | exec:*) ;;
          *) say "$f:$line" "includes $target: only src/session (kernels/embedded.h) and src/exec see kernels/" ;;
        esac
        ;;
      base | compile | cuda | session | graph | exec)
        them=$(rank "$top")
        [ "$them" -gt "$me" ] && say "$f:$line" "includes $target: src/$layer may not include src/$top, a layer above it ($(IFS='<'; echo "${order[*]}"))"
        ;;
      *) say "$f:$line" "includes \"$target\": not a header of src/, kdag/ or kernels/" ;;
    esac
  done < <(grep -n '^#include "' "$f" | sed 's/:#include /:/')
  case "$f" in
    src/cuda/* | src/exec/cuda_*.c) ;;
    *) grep -n -- 'cu->cu[A-Z]' "$f" | while IFS=: read -r line _; do
         echo "$f:$line: calls the driver: only src/cuda/ and src/exec/cuda_*.c do"
       done | tee /tmp/check-layers.$$ ;
       [ -s /tmp/check-layers.$$ ] && bad=1
       rm -f /tmp/check-layers.$$ ;;
  esac
done

for f in examples/*.[ch] bench/*.[ch] cli/*.[ch]; do
  [ -f "$f" ] || continue
  while IFS=: read -r line inc; do
    target=${inc#*\"}
    target=${target%\"*}
    case "$f:$target" in
      *:kdag/*) ;;
      examples/*:examples/*) ;;
      bench/*:bench/* | bench/*:kernels/embedded.h | bench/*:kernels/strided.h | bench/*:kernels/host.h) ;;
      bench/*:cuda/driver.h) ;; # the driver table: the bench runs on whichever driver kdag loaded (the null driver)
      bench/*:base/dynlib.h) ;; # one library loader: the baselines (cuBLAS, cuSOLVER) are found where kdag finds its own
      bench/*:base/size.h | bench/*:base/file.h) ;; # a user's kernel: sizes as the cache reads them, the file
      bench/*:examples/dx_kernels.h) ;;
      bench/*:session/dlpack.h) ;; # the DLPack layout, which the public headers leave out (a user's dlpack.h would clash)
      cli/*:cli/* | cli/*:base/size.h | cli/*:base/dynlib.h | cli/*:base/file.h) ;; # the tool: sizes, the libraries kdag found, files
      cli/*:compile/ptx.h | cli/*:compile/image_kernels.h) ;; # kdag inspect reads binaries as kdag does
      *) say "$f:$line" "includes $target: examples use the public headers only; bench/ too, with the driver table and the library loader" ;;
    esac
  done < <(grep -n '^#include "' "$f" | sed 's/:#include /:/')
done

[ $bad -eq 0 ] && echo "layers: every include and driver call keeps to its layer"
exit $bad
