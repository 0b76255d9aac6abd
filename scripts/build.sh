#!/usr/bin/env bash
# Configures and builds Hearth in Release into build/ (tests included). Extra args go to cmake --build.
# Uses ccache when it is installed (an incremental rebuild after a branch switch then takes seconds, not minutes).
# HEARTH_VULKAN=ON (or OFF) in the environment sets the CMake option of the same name (the Vulkan backend, src/gpu);
# unset, build/ keeps what it was configured with (a new build/ is the CPU-only default).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
options=()
if [[ -n "${HEARTH_VULKAN:-}" ]]; then options=(-DHEARTH_VULKAN="$HEARTH_VULKAN"); fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DHEARTH_BUILD_TESTS=ON "${launcher[@]}" "${options[@]}" >/dev/null
cmake --build build -j"$(nproc)" "$@"
