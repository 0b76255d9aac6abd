#!/usr/bin/env bash
# The fast loop, to run before every commit (minutes on an incremental build, no root): the layer rules, clang-format
# on the C++ lines changed since BASE (default HEAD: uncommitted changes; `scripts/check.sh main` for a branch), an
# incremental Release build, and the suites labelled `fast` (no model, about a second each). scripts/test.sh stays the
# CI gate: everything, the ASan/UBSan build and the e2e suite.
#   scripts/check.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
base="${1:-HEAD}"

echo "== layers"
tools/check-layers

echo "== clang-format (lines changed since $base)"
# Only the changed lines: older files predate .clang-format, and a change reformats what it touches, not the file.
format_diff="$(git clang-format --diff "$base" -- '*.h' '*.cpp' '*.inc')"
if [[ "$format_diff" == diff* ]]; then
  printf '%s\n' "$format_diff"
  echo "clang-format: the lines above are not formatted as .clang-format says (git clang-format $base fixes them)"
  exit 1
fi
echo "${format_diff:-changed lines formatted}"
mapfile -t new_files < <(git ls-files --others --exclude-standard -- '*.h' '*.cpp' '*.inc')
if ((${#new_files[@]} > 0)); then
  clang-format --dry-run --Werror "${new_files[@]}"
  echo "${#new_files[@]} new file(s) formatted"
fi

echo "== build (incremental, Release)"
scripts/build.sh

echo "== ctest -L fast"
(cd build && ctest -L fast --output-on-failure -j"$(nproc)")
