#!/usr/bin/env bash
# Installs dependencies, builds, and serves the default model over the OpenAI-compatible API.
# Usage: scripts/run.sh [MODEL.gguf] [extra `hearth serve` flags]     (default model: ../shared/models/stories260K.gguf)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target hearth
model="../shared/models/stories260K.gguf"
if [[ $# -gt 0 && "$1" == *.gguf ]]; then model="$1"; shift; fi
if [[ ! -f "$model" ]]; then
  echo "model not found: $model (pass any GGUF path as the first argument)" >&2
  exit 1
fi
exec build/src/app/hearth serve -m "$model" "$@"
