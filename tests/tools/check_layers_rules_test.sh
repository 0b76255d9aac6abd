#!/usr/bin/env bash
# tools/check-layers on a small fake tree (layers util < low < high; high/http a transport that may include only
# util; high/openai and high/anthropic apart): the tree as written passes, and each CASE below breaks one rule
# and checks that check-layers fails naming the file and the header (or the line of tools/layers.txt).
# Usage: check_layers_rules_test.sh CASE
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

put() {  # FILE LINE...: writes the lines to $tmp/FILE
  mkdir -p "$(dirname "$tmp/$1")"
  local file="$1"
  shift
  printf '%s\n' "$@" >"$tmp/$file"
}
put tools/layers.txt 'util:' 'low: util' 'high: low util  # a comment' 'high/http: util' \
  'apart: high/openai high/anthropic'
put src/util/ids.h '#pragma once'
put src/low/low.h '#pragma once' '#include "util/ids.h"' '#include <vector>'
put src/low/tiles.inc '#include "util/ids.h"'
put src/high/high.h '#pragma once' '#include "low/low.h"' '#include "high/http/transport.h"'
put src/high/http/transport.h '#pragma once' '#include "util/ids.h"' '#include "high/http/detail/parse.h"'
put src/high/http/detail/parse.h '#pragma once' '#include "parse_table.h"'
put src/high/openai/chat.cpp '#include "high/high.h"' '#include "high/http/transport.h"' '#include "low/low.h"'
put src/high/anthropic/messages.cpp '#include "high/http/transport.h"'

expect_fail() {  # PATTERN...: check-layers fails, and its messages match each extended regex
  if "$repo/tools/check-layers" "$tmp" 2>"$tmp/err" >/dev/null; then
    echo "FAIL: check-layers accepted the tree" >&2
    exit 1
  fi
  for pattern in "$@"; do
    grep -qE "$pattern" "$tmp/err" || { echo "FAIL: no message matches /$pattern/:" >&2; cat "$tmp/err" >&2; exit 1; }
  done
}

case "${1:?CASE}" in
  passes)
    "$repo/tools/check-layers" "$tmp" >/dev/null
    ;;
  subfolder)  # a file under a folder with its own line, and one in a deeper folder that inherits it
    put src/high/http/transport.h '#pragma once' '#include "util/ids.h"' '#include "low/low.h"'
    put src/high/http/detail/parse.h '#pragma once' '#include "high/openai/chat.h"'
    expect_fail '^src/high/http/transport.h:3: .*"low/low.h"' '^src/high/http/detail/parse.h:2: .*"high/openai/chat.h"'
    ;;
  inc)  # a .inc file is read like a header
    put src/low/tiles.inc '#include "util/ids.h"' '#include "high/high.h"'
    expect_fail '^src/low/tiles.inc:2: layer .low. may not include "high/high.h"'
    ;;
  apart)  # folders of one apart line include nothing of each other, whichever way
    put src/high/openai/chat.cpp '#include "high/anthropic/messages.h"'
    put src/high/anthropic/messages.cpp '#include "high/openai/sub/chat.h"'
    expect_fail '^src/high/openai/chat.cpp:1: .*"high/anthropic/messages.h"' \
      '^src/high/anthropic/messages.cpp:1: .*"high/openai/sub/chat.h"'
    ;;
  spelling)  # spaces around #include, <...> naming a src/ folder, and a relative path are all checked
    put src/low/low.h '#pragma once' '  #  include   "high/high.h"' '#include <high/http/transport.h>' \
      '#include "../high/openai/chat.h"'
    expect_fail '^src/low/low.h:2: .*"high/high.h"' '^src/low/low.h:3: .*"high/http/transport.h"' \
      '^src/low/low.h:4: .*"high/openai/chat.h"'
    ;;
  matrix)  # a grant no include uses, one covered by another, one beyond the layer's, a folder without a line
    put tools/layers.txt 'util:' 'low: util util/ids.h' 'high: low util' 'high/http: util low/low.h' \
      'apart: high/openai high/anthropic'
    put src/extra/extra.h '#pragma once'
    sed -i 's|high/http/transport.h|util/ids.h|' "$tmp/src/high/openai/chat.cpp" "$tmp/src/high/anthropic/messages.cpp"
    put src/high/high.h '#pragma once' '#include "low/low.h"'
    put src/high/http/transport.h '#pragma once' '#include "low/low.h"'
    expect_fail "'low' grants 'util/ids.h', which its grant 'util' already covers" \
      "'high/http' grants 'util', which no include in src/high/http uses" \
      "src/extra is not in tools/layers.txt"
    put tools/layers.txt 'util:' 'low: util' 'high: low util' 'high/http: util' 'high/openai: low tensor' \
      'apart: high/openai high/missing'
    expect_fail "'high/openai' grants 'tensor', which layer 'high' is not allowed" \
      "apart names 'high/missing', which is no subfolder"
    ;;
  *)
    echo "unknown case $1" >&2
    exit 2
    ;;
esac
echo "check-layers: case $1 as expected"
