#!/usr/bin/env bash
# Installs kdag's build and test dependencies from Debian's packages.
# The CUDA toolkit (nvcc, headers, NVRTC, nvJitLink) is expected at
# /usr/local/cuda or on PATH; kdag needs no GPU and no driver to build.
set -euo pipefail
pkgs=(cmake pkg-config gcc make libck-dev libhwloc-dev libcriterion-dev libjansson-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "note: add /usr/local/cuda/bin to PATH (nvcc builds the embedded kernels)"
fi
