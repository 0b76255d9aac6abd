#!/usr/bin/env bash
# Installs the peer, llama.cpp v0.5.0 as the npm package node-llama-cpp 3.22.1 ships it prebuilt, into bench/peer
# from its package-lock.json: the CPU build only (--omit=optional leaves out the Vulkan and CUDA packages), and no
# install script (--ignore-scripts: it never compiles or downloads anything beyond the registry's tarballs).
# `npm install --no-save` against the lock rather than `npm ci`: the registry these machines reach has no
# macOS/Windows builds of node-llama-cpp, so the lock cannot list them and `npm ci` refuses it as out of sync; with
# the lock present, `npm install` takes exactly its versions and integrity hashes and leaves it unchanged.
# Quiet and quick when that lock is already installed. Used by scripts/test.sh (the ArchPeer tests) and by the
# benchmarks that compare against the peer; Hearth's own build never needs it.
set -euo pipefail
cd "$(dirname "$0")/../bench/peer"
stamp=node_modules/.hearth-peer-lock
if [[ -f "$stamp" ]] && cmp -s package-lock.json "$stamp" && [[ -d node_modules/@node-llama-cpp/linux-x64/bins ]]; then
  exit 0
fi
npm install --no-save --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
