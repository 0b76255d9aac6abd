#pragma once
// Shared fixtures for engine tests: load a model once, drive an Engine to completion step by step.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/loaded_model.h"

namespace hearth::testing {

inline const std::string kShared = HEARTH_SHARED_DIR;
inline const std::string kStories = kShared + "/models/stories260K.gguf";

// Loads once per path for the whole test binary.
inline LoadedModel& load_model(const std::string& path) {
  static std::map<std::string, LoadedModel> cache;
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  auto loaded = load_model_file(path);
  HEARTH_CHECK(loaded.ok(), "{}", loaded.error().message);
  return cache.emplace(path, std::move(*loaded)).first->second;
}

struct Finished {
  std::vector<TokenId> tokens;
  std::string text;
  FinishReason reason = FinishReason::kNone;
  RequestUsage usage;
  std::optional<RuntimeError> runtime_error;
  int32_t num_outputs = 0;  // outputs delivered, the final one included
};

// Steps until the engine is idle, checking invariants after every step. Aborts the test on a stall.
inline std::map<uint64_t, Finished> run_to_completion(Engine& engine) {
  std::map<uint64_t, Finished> done;
  for (int step = 0; engine.has_unfinished(); ++step) {
    HEARTH_CHECK(step < 100000, "engine made no progress");
    for (RequestOutput& out : engine.step()) {
      Finished& f = done[out.id.value];
      f.num_outputs++;
      f.tokens.insert(f.tokens.end(), out.new_tokens.begin(), out.new_tokens.end());
      f.text += out.new_text;
      if (out.finished) {
        f.reason = out.finish_reason;
        f.usage = out.usage;
        f.runtime_error = out.runtime_error;
      }
    }
    engine.check_invariants();
  }
  return done;
}

inline std::vector<TokenId> story_tokens(const Tokenizer& tok, size_t n, const std::string& seed_text) {
  std::string text = seed_text;
  while (tok.encode(text, true).size() < n) text += " Tom and Sue went to the big park. They saw a dog and a cat.";
  auto t = tok.encode(text, true);
  t.resize(n);
  return t;
}

}  // namespace hearth::testing
