#!/usr/bin/env bash
# Installs dependencies and the peer (scripts/peer-install.sh: llama.cpp through node-llama-cpp, which the ArchPeer
# tests run), checks the layer rules (tools/check-layers), builds Release with tests and the Vulkan backend
# (HEARTH_VULKAN=ON: the shader tests run on lavapipe, which install-deps installs, and CI=1 makes a missing Vulkan
# device fail them instead of skipping) and runs the whole suite, then
# the e2e suite (scripts/e2e.sh: the openai npm client against a real hearth serve); then builds every suite and
# hearth itself with AddressSanitizer + UBSan (Debug, -O1) and runs them again: ctest, and the e2e suite against the
# sanitizer build of `hearth serve` on stories260K.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/peer-install.sh
tools/check-layers
HEARTH_VULKAN=ON scripts/build.sh
(cd build && CI="${CI:-1}" ctest --output-on-failure -j"$(nproc)")
scripts/e2e.sh

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHEARTH_SANITIZE=ON -DHEARTH_BUILD_TESTS=ON "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$(nproc)" --target hearth_sanitize_tests hearth
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && ctest --output-on-failure -L sanitize -j"$(nproc)")
HEARTH_BIN=build-asan/src/app/hearth scripts/e2e.sh
