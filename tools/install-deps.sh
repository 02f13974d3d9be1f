#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs kdag's build and test dependencies from Debian's packages.
# The CUDA toolkit (nvcc, headers, NVRTC, nvJitLink) is expected at
# /usr/local/cuda or on PATH; kdag needs no GPU and no driver to build.
set -euo pipefail
# g++ and libudev-dev: the downstream test (a C++17 file; hwloc's static
# link flags, which pkg-config --static follows, name -ludev).
# doxygen: the API reference (ctest api_docs); abigail-tools: the ABI
# check against the previous release (tools/abi-check.sh); libdlpack-dev:
# DLPack's own header, which host_dlpack_test checks kdag's import against;
# python3-numpy: a real DLPack producer and consumer (ctest dlpack_numpy);
# python3-pytest: the Python package's tests (ctest python).
pkgs=(cmake pkg-config gcc g++ clang make binutils libck-dev libhwloc-dev libudev-dev libcriterion-dev libjansson-dev libxxhash-dev libzstd-dev doxygen abigail-tools libdlpack-dev python3-numpy python3-pytest)
# pip installs MathDx (tools/install-mathdx.sh) when no python3 pip exists yet.
command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 || pkgs+=(python3-pip)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
# MathDx (cuBLASDx/cuSOLVERDx headers, libmathdx) from PyPI into
# third_party/mathdx: the host lane compiles and links the Dx kernels.
"$(dirname "$0")/install-mathdx.sh"
# NumPy for the python3 on PATH (the one CMake finds for ctest dlpack_numpy):
# Debian's python3-numpy serves /usr/bin/python3 only.
python3 -c 'import numpy' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check numpy
# pytest likewise (ctest python: the Python package's tests).
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pytest
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "note: add /usr/local/cuda/bin to PATH (nvcc builds the embedded kernels)"
fi
