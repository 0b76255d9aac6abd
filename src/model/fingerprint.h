#pragma once
// Model fingerprint: names a model in prefix-cache keys, which the disk tier keeps across restarts. SHA-256 over
// every metadata key and value, every tensor's name, type, shape and offset, and an XXH3-128 digest of the weight
// bytes themselves, so a file rewritten in place with equal metadata and layout (a re-quantization, a fine-tune
// saved over the old one) never matches the old file's KV on disk. XXH3 reads memory near the bandwidth, so the
// weights cost a fraction of what loading them costs (docs/kv-cache.md, "Tiers").

#include <string>

#include "gguf/gguf_file.h"

namespace hearth {

// Hex SHA-256, stable across builds and machines.
std::string model_fingerprint(const GgufFile& file);

}  // namespace hearth
