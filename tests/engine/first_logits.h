#pragma once
// The logits an engine samples a prompt's first token from, for tests that compare a prefix-cache hit with a cold
// run (tests/model/arch_test.cpp, tests/kernels/quantized_model_e2e_test.cpp).

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace hearth::test {

// The logits the engine samples the first token of `prompt` from (greedy), and in *cached_tokens how many prompt
// tokens it reused from the prefix cache. Checks the pool's invariants after the request.
inline std::vector<float> first_logits(Engine& engine, const std::vector<int32_t>& prompt, int32_t* cached_tokens,
                                       std::vector<int32_t> checkpoint_hints = {}) {
  std::vector<float> logits;
  engine.set_logits_observer([&](RequestId, std::span<const float> row) { logits.assign(row.begin(), row.end()); });
  RequestSpec spec;
  for (int32_t t : prompt) spec.prompt.push_back(TokenId{t});
  spec.sampling.temperature = 0.0f;
  spec.max_tokens = 1;
  spec.ignore_eos = true;
  spec.checkpoint_hints = std::move(checkpoint_hints);
  auto id = engine.add_request(std::move(spec));
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().message);
  for (int step = 0; engine.has_unfinished() && step < 1000; ++step) {
    for (const RequestOutput& out : engine.step()) {
      if (out.finished) *cached_tokens = out.usage.cached_tokens;
    }
  }
  engine.check_invariants();
  return logits;
}

}  // namespace hearth::test
