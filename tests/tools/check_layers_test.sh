#!/usr/bin/env bash
# tools/check-layers passes on the tree, and fails (naming the file and the header) on a copy of it in which the
# server includes a kernel header, kv a tensor header, the GPU layer a model header, kernels or the server a GPU
# header, the server's transport an API header, its neutral API a dialect's header, and one dialect the other's.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
"$repo/tools/check-layers" "$repo" >/dev/null

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
expect_rejected() {  # FILE HEADER
  rm -rf "$tmp/copy" && mkdir -p "$tmp/copy" && cp -r "$repo/src" "$repo/tools" "$tmp/copy/"
  printf '#include "%s"\n' "$2" >>"$tmp/copy/$1"
  if "$tmp/copy/tools/check-layers" "$tmp/copy" 2>"$tmp/err"; then
    echo "FAIL: check-layers accepted $1 including $2" >&2
    exit 1
  fi
  grep -q "$1:.*\"$2\"" "$tmp/err" || { echo "FAIL: the message does not name $1 and $2:" >&2; cat "$tmp/err" >&2; exit 1; }
}
expect_rejected src/server/openai/completions.cpp kernels/matmul.h
expect_rejected src/kv/kv_plan.h tensor/kv_dtype.h
expect_rejected src/server/server.h engine/engine.h
expect_rejected src/server/http/http_types.h server/api/api_error.h
expect_rejected src/server/api/server_context.cpp server/openai/openai_json.h
expect_rejected src/server/anthropic/messages.cpp server/openai/openai_json.h
expect_rejected src/gpu/ops.cpp model/config.h
expect_rejected src/kernels/ops.cpp gpu/context.h
expect_rejected src/server/server.h gpu/context.h
echo "check-layers accepts the tree and rejects wrong includes"
