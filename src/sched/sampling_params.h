#pragma once
// SamplingParams: how a request's next token is chosen. Plain data; the engine's Sampler acts on it.

#include <cstdint>

#include "util/result.h"

namespace hearth {

struct SamplingParams {
  float temperature = 0.8f;  // 0 = greedy
  int32_t top_k = 40;        // 0 disables
  float top_p = 0.95f;       // 1 disables
  uint64_t seed = 0;

  // Checks ranges; the message names the bad field and its allowed range.
  [[nodiscard]] Result<void> validate() const {
    if (!(temperature >= 0.0f && temperature <= 100.0f)) {
      return make_error("temperature {} is out of range [0, 100]", temperature);
    }
    if (!(top_p > 0.0f && top_p <= 1.0f)) return make_error("top_p {} is out of range (0, 1]", top_p);
    if (top_k < 0) return make_error("top_k {} must be >= 0 (0 disables it)", top_k);
    return {};
  }
};

}  // namespace hearth
