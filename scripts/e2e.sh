#!/usr/bin/env bash
# End-to-end suite: the official openai npm client (pinned in e2e/package-lock.json) against a real `hearth serve`
# on stories260K, started by each test file on a free port. HEARTH_BIN overrides the binary (default
# build/src/app/hearth, built here when missing). Extra args go to `node --test`.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${HEARTH_BIN:-build/src/app/hearth}"
if [[ ! -x "$bin" ]]; then scripts/build.sh --target hearth; fi
npm ci --prefix e2e --no-audit --no-fund --loglevel=error
HEARTH_BIN="$(realpath "$bin")" node --test "$@" e2e/
