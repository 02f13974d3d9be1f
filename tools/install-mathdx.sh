#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs NVIDIA MathDx (cuBLASDx, cuSOLVERDx headers with CUTLASS and
# commonDx; libmathdx) from PyPI into third_party/mathdx (git-ignored), at
# pinned versions. MathDx is NVIDIA's, under its own licence (see the
# wheels' dist-info/licenses): accepting it is the user's responsibility.
#
# --no-deps: nvidia-libmathdx-cu13 otherwise pulls a newer NVRTC wheel than
# the CUDA 13.0 driver/toolkit can use; kdag makes libmathdx use the
# toolkit's NVRTC, so its LTO-IR is never newer than the toolkit's nvJitLink.
#
# Usage: tools/install-mathdx.sh [DEST]   (DEST defaults to third_party/mathdx)
set -euo pipefail
cd "$(dirname "$0")/.."
MATHDX_VERSION=25.6.0          # nvidia-mathdx: cuBLASDx 0.4.0, cuSOLVERDx 0.2.0 headers
LIBMATHDX_VERSION=0.4.2.37     # nvidia-libmathdx-cu13: libmathdx 0.4.2 (MathDx 26.10 generators)
dest="${1:-third_party/mathdx}"
stamp="$dest/.kdag-mathdx-$MATHDX_VERSION-$LIBMATHDX_VERSION"
if [ -f "$stamp" ]; then
  echo "MathDx $MATHDX_VERSION + libmathdx $LIBMATHDX_VERSION already in $dest"
  exit 0
fi
py="$(command -v python3 || command -v python || true)"
if [ -z "$py" ] || ! "$py" -m pip --version >/dev/null 2>&1; then
  echo "install-mathdx: needs python3 with pip (apt-get install python3-pip)" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" \
  "nvidia-mathdx==$MATHDX_VERSION" "nvidia-libmathdx-cu13==$LIBMATHDX_VERSION"
test -f "$dest/nvidia/mathdx/include/cublasdx.hpp"
test -f "$dest/nvidia/cu13/lib/libmathdx.so.0"
touch "$stamp"
echo "MathDx $MATHDX_VERSION + libmathdx $LIBMATHDX_VERSION installed in $dest"
