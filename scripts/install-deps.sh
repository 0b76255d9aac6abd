#!/usr/bin/env bash
# Installs Hearth's build and test dependencies from Debian 12 packages.
# Idempotent: prints nothing and exits 0 when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libssl-dev libopenblas-dev
  libcpp-httplib-dev libboost-dev libicu-dev libxxhash-dev libhiredis-dev
  chromium
  python3-jinja2
  haproxy redis-server lua5.3 curl
  libvulkan-dev glslc mesa-vulkan-drivers
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# libvulkan-dev, glslc: the Vulkan backend (-DHEARTH_VULKAN=ON, which scripts/test.sh builds); mesa-vulkan-drivers:
# lavapipe, the Vulkan device on the CPU that the shader tests (tests/gpu) run on where there is no GPU.
# python3-jinja2 (Debian's /usr/bin/python3): the tests that check every chat template against Jinja2 itself.
# chromium: the dashboard's browser test (e2e/dashboard.test.mjs) drives Debian's /usr/bin/chromium with
# playwright-core (e2e/package.json); no browser is ever downloaded.
# The end-to-end suite runs the official openai npm client on Node.js (the machines ship Node 20; Debian's
# nodejs is the fallback).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
