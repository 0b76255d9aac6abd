#!/usr/bin/env bash
# The fast loop, to run before every commit (minutes on an incremental build, no root): the layer rules, clang-format
# on the C++ files changed since BASE (default HEAD: uncommitted changes; `scripts/check.sh main` for a branch), an
# incremental Release build, and the suites labelled `fast` (no model, about a second each). scripts/test.sh stays the
# CI gate: everything, the ASan/UBSan build and the e2e suite.
#   scripts/check.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-HEAD}"

echo "== layers"
tools/check-layers

echo "== clang-format (changed since $base)"
mapfile -t changed < <({
  git diff --name-only --diff-filter=ACMR "$base" -- '*.h' '*.cpp' '*.inc'
  git ls-files --others --exclude-standard -- '*.h' '*.cpp' '*.inc'
} | sort -u)
if ((${#changed[@]} > 0)); then
  clang-format --dry-run --Werror "${changed[@]}"
  echo "${#changed[@]} file(s) formatted as .clang-format says"
else
  echo "no C++ file changed"
fi

echo "== build (incremental, Release)"
scripts/build.sh

echo "== ctest -L fast"
(cd build && ctest -L fast --output-on-failure -j"$(nproc)")
