#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang-14, -fsanitize=fuzzer,address,undefined) into build-fuzz/ and runs
# each for SECONDS (default 60) on a scratch copy of its committed corpus (fuzz/corpus/<target>/). New crashing
# inputs are written to build-fuzz/findings/<target>/; add each to fuzz/corpus/<target>/ with its fix, so the
# replay test (ctest -L fuzz, also in scripts/test.sh) keeps checking it.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   targets: request_json chat_template tokenizer gguf tier_entry
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if ((${#targets[@]} == 0)); then targets=(request_json chat_template tokenizer gguf tier_entry); fi

if ! command -v clang++-14 >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz: installing clang-14 and libclang-rt-14-dev"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >/dev/null
fi

cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DHEARTH_FUZZ=ON -DHEARTH_BUILD_TESTS=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

status=0
for t in "${targets[@]}"; do
  work="build-fuzz/corpus/$t"
  findings="build-fuzz/findings/$t"
  mkdir -p "$work" "$findings"
  cp -n fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  echo "fuzz: $t for ${seconds}s"
  # pipefail: a crash (nonzero exit of the fuzzer) fails the pipeline.
  if ! UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    build-fuzz/fuzz/fuzz_"$t" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$work" 2>&1 | tee "build-fuzz/fuzz-$t.log" | tail -n 25; then
    status=1
  fi
  if ls "$findings"/* >/dev/null 2>&1; then
    echo "fuzz: $t found something: see $findings/ and build-fuzz/fuzz-$t.log"
    status=1
  fi
done
exit "$status"
